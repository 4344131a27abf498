"""An autotuned kernel's warm re-run in a new process: seconds from the process's start to
its first launch, when the tuning record and the compiled kernel are in the cache.

One subprocess tunes the block (`@autotune`, in a fresh cache folder unless `--cache-dir`
names one), then `--runs` fresh subprocesses run the same block again. Each reports, from
the moment the parent started it: Python ready (the script's first line), `import zynbook`
done, the Session made (its device found), and the first launch's result on the host (the
cell parsed, the record read, the winner's kernel loaded, launched and waited for). A warm
run that searched again, found no record or ran the compiler is an error.

    python bench/bench_tuning_warm.py [--device cpu:native|cuda:0] [--kernel matmul|attention]
                                      [--size 256] [--runs 3] [--cache-dir DIR] [--standin]
                                      [--no-bytecode] [--profile] [--json out.json]

ZynBook is timed as installed: the bytecode of its modules, and of the packages a warm run
imports (numpy, lark, CuPy), is compiled first where missing, as `pip install` does. The GPU
machines' images set PYTHONDONTWRITEBYTECODE and ship those packages without bytecode, so
every process there compiled every module it imported (an H100 host: about 0.25 s of a
1.3 s warm run for ZynBook, 0.4 s for the others; an H200 host: a 1.06 s warm CUDA run
became 0.57 s); `--no-bytecode` times the machine as found.

`--kernel matmul` is an f32 matmul of `--size` squared; `attention` a flash attention of
8 heads of 64 over `--size` positions. `--standin` runs `cuda:0` on the CuPy stand-in of the
tests (tests/cupy_standin.py): the CUDA path's host work on a machine without a GPU.
`--profile` runs one more warm run under cProfile and prints it (cumulative time).
"""
from __future__ import annotations

import time

_T0 = time.time()       # the child's first moment with Python (imports come after)

import argparse  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")

MATMUL = """let z = compute(a, b) {
    @kernel matmul
    @autotune
    for i in 0..m, j in 0..n:
        var s = 0.0
        for k in 0..kk:
            s += a[i, k] * b[k, j]
        out[i, j] = s
}
z
"""

STAGES = ("python", "import", "session", "first_result")


def attention_source() -> str:
    sys.path.insert(0, os.path.join(ROOT, "tests"))
    from kernel_sources import FLASH_TEMPLATE
    return FLASH_TEMPLATE.replace("BLOCK", "32").replace(
        "@kernel flash_attention", "@kernel flash_attention\n    @autotune") + "attn\n"


def inputs(kernel: str, size: int, xp) -> dict:
    """The block's bindings (`xp`: numpy, or CuPy on `cuda:N`)."""
    import numpy as np
    rng = np.random.default_rng(0)
    if kernel == "matmul":
        return {"a": xp.asarray(rng.standard_normal((size, size)).astype(np.float32)),
                "b": xp.asarray(rng.standard_normal((size, size)).astype(np.float32))}
    qkv = [xp.asarray(rng.standard_normal((1, 8, size, 64)).astype(np.float32))
           for _ in range(3)]
    return dict(zip("QKV", qkv), seq_len=size, head_dim=64)


def install_standin():
    """CuPy replaced by the tests' stand-in (kernels run the CPU reference executor)."""
    sys.path.insert(0, os.path.join(ROOT, "tests"))
    import cupy_standin

    class Patch:        # what cupy_standin.install asks of pytest's monkeypatch
        setitem = staticmethod(lambda d, k, v: d.__setitem__(k, v))
        setattr = staticmethod(setattr)

    cupy_standin.install(Patch)


# ------------------------------------------------------------------------------ child


def child(args, spawned_at: float) -> dict:
    """One process's run of the block, its stages timed from `spawned_at`."""
    marks = {"python": _T0}
    sys.path.insert(0, ROOT)
    if args.standin:
        install_standin()
    import numpy as np
    import zynbook
    from zynbook import tuning
    from zynbook.backends.registry import get_device
    marks["import"] = time.time()
    session = zynbook.Session(args.device)
    marks["session"] = time.time()
    device = get_device(args.device)
    xp = np
    if args.device.startswith("cuda"):
        import cupy as xp
    source = MATMUL if args.kernel == "matmul" else attention_source()
    bound = inputs(args.kernel, args.size, xp)
    builds = device.cache.builds
    result = session.run(source, **bound)
    host = np.asarray(result.numpy())
    marks["first_result"] = time.time()
    launch = session.launches[-1] if session.launches else None
    return {"seconds": {k: marks[k] - spawned_at for k in STAGES},
            "searches": tuning.STATS["searches"], "from_cache": tuning.STATS["from_cache"],
            "compiler_runs": device.cache.builds - builds,
            "tuning": launch.geometry.get("tuning", "") if launch else "",
            "finite": bool(np.isfinite(host).all())}


def run_child(args, mode: str, cache_dir: str, profile: bool = False) -> dict:
    cmd = [sys.executable, os.path.abspath(__file__), "--child", mode, "--device", args.device,
           "--kernel", args.kernel, "--size", str(args.size)]
    if args.standin:
        cmd.append("--standin")
    if profile:
        cmd = [sys.executable, "-m", "cProfile", "-s", "cumtime"] + cmd[1:]
    env = dict(os.environ, ZYNBOOK_CACHE_DIR=cache_dir, ZYNBOOK_SPAWNED_AT=repr(time.time()))
    res = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT, timeout=3600)
    if res.returncode != 0:
        raise SystemExit(f"the {mode} run failed:\n{res.stderr[-4000:]}")
    lines = res.stdout.splitlines()
    found = next(i for i, line in enumerate(lines) if line.startswith("{"))
    out = json.loads(lines[found])
    out["profile"] = "\n".join(lines[found + 1:])
    return out


# the packages a warm run imports besides ZynBook
IMPORTED = ("numpy", "lark", "cupy", "cupy_backends", "fastrlock")


def compile_bytecode():
    """ZynBook's bytecode and that of the packages it imports, compiled where missing (and
    where the folder is writable), as `pip install` leaves them."""
    import compileall           # py_compile writes whatever PYTHONDONTWRITEBYTECODE says
    import importlib.util
    folders = [os.path.join(ROOT, "zynbook")]
    for name in IMPORTED:
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.submodule_search_locations:
            folders += list(spec.submodule_search_locations)
    for folder in folders:
        compileall.compile_dir(folder, quiet=2, workers=0)


def check_warm(run: dict):
    if run["searches"] or not run["from_cache"] or run["compiler_runs"]:
        raise SystemExit(f"not a warm run: {run['searches']} searches, {run['from_cache']} "
                         f"records used, {run['compiler_runs']} compiler runs "
                         f"({run['tuning']!r})")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cpu:native", help="cpu:native, cuda:0, ...")
    ap.add_argument("--kernel", default="matmul", choices=("matmul", "attention"))
    ap.add_argument("--size", type=int, default=256)
    ap.add_argument("--runs", type=int, default=3, help="warm runs (fresh processes)")
    ap.add_argument("--cache-dir", default=None,
                    help="the cache folder (default: a fresh one, so the first run tunes)")
    ap.add_argument("--standin", action="store_true",
                    help="cuda:0 on tests/cupy_standin.py (no GPU needed)")
    ap.add_argument("--no-bytecode", action="store_true",
                    help="do not compile bytecode first (the packages as the machine has them)")
    ap.add_argument("--profile", action="store_true",
                    help="one more warm run under cProfile, printed by cumulative time")
    ap.add_argument("--json", default=None)
    ap.add_argument("--child", choices=("tune", "warm"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        spawned_at = float(os.environ.get("ZYNBOOK_SPAWNED_AT", _T0))
        print(json.dumps(child(args, spawned_at)))
        return
    cache_dir = args.cache_dir or tempfile.mkdtemp(prefix="zynbook-warm-")
    if not args.no_bytecode:
        compile_bytecode()
    tuned = run_child(args, "tune", cache_dir)
    print(f"device {args.device}, {args.kernel} of size {args.size}, cache {cache_dir}, "
          f"bytecode {'as found' if args.no_bytecode else 'compiled first'}")
    print(f"tuning run: {tuned['seconds']['first_result']:.2f} s "
          f"({tuned['searches']} searches; {tuned['tuning']})")
    warm = []
    for n in range(args.runs):
        run = run_child(args, "warm", cache_dir)
        check_warm(run)
        warm.append(run)
        print("warm run " + str(n + 1) + ": " + ", ".join(
            f"{k} {run['seconds'][k]:.3f} s" for k in STAGES))
    first = [r["seconds"]["first_result"] for r in warm]
    print(f"warm re-run in a new process, start to the first launch's result: median "
          f"{statistics.median(first):.3f} s (min {min(first):.3f}, max {max(first):.3f}); "
          f"{warm[-1]['tuning']}")
    if args.profile:            # one more warm run, under the profiler (not timed above)
        print(run_child(args, "warm", cache_dir, profile=True)["profile"])
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": args.device, "kernel": args.kernel, "size": args.size,
                       "tuning": tuned, "warm": [dict(r, profile="") for r in warm]}, f,
                      indent=2)


if __name__ == "__main__":
    main()
