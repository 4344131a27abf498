"""`browser:0` benchmarks: the round trip of a small kernel launched on the page's GPU from
a ZynML kernel, and the transfer rate of the `zynbook.browser` comm (kernel -> page -> kernel).

Starts JupyterLab with the ZynML kernel and the extension and Debian's headless Chromium with
WebGPU (SwiftShader where there is no GPU; `--chromium PATH`), opens a notebook so that the
page connects as `browser:0`, then times in the kernel (medians after warm-up):

- round trip: one launch of an elementwise kernel over 1024 f32 values (plan, comm both
  ways, dispatch on the page, read-back), and what the page measured of it;
- echo: N bytes sent to the page and back through the comm; the rate counts both ways
  (2 N bytes / time).

Prints a table and writes JSON (--json PATH).

    python bench/bench_browser.py [--reps 20] [--sizes 1,16] [--json out.json]
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests" / "browser"))

import labserver as L  # noqa: E402

KERNEL_CODE = r'''%%python
import json, statistics, time, numpy as np, zynbook
from zynbook.backends.registry import get_device
dev = get_device("browser:0")
src = """let y = compute(x) @device("browser:0") {
    @kernel elementwise
    for i in 0..n:
        out[i] = x[i] * 2.0 + 1.0
}
y"""
x = np.arange(1024, dtype=np.float32)
session = zynbook.Session(device="cpu")
for _ in range(3):
    session.run(src, x=x)                  # warm-up: the page compiles the pipeline once
rt, page, kernel = [], [], []
for _ in range(REPS):
    session.launches.clear()
    t0 = time.perf_counter()
    y = session.run(src, x=x)
    rt.append(time.perf_counter() - t0)
    launch = session.launches[-1]
    page.append(launch.geometry["round_trip"])
    kernel.append(launch.times.kernel)
assert np.allclose(np.asarray(y), x * 2 + 1)
rows = [{"what": "round trip, elementwise 1024 f32 (session.run)", "median_ms":
         statistics.median(rt) * 1e3, "min_ms": min(rt) * 1e3},
        {"what": "  of which comm + page (launch to reply)", "median_ms":
         statistics.median(page) * 1e3, "min_ms": min(page) * 1e3},
        {"what": "  of which GPU kernel (" + launch.times.source + ")", "median_ms":
         statistics.median(kernel) * 1e3, "min_ms": min(kernel) * 1e3}]
there, back = [], []
for _ in range(REPS):
    _, _, a, b = dev.echo(b"12345678", split=True)
    there.append(a)
    back.append(b)
rows += [{"what": "8-byte message kernel -> page (wall clocks)", "median_ms":
          statistics.median(there) * 1e3, "min_ms": min(there) * 1e3},
         {"what": "8-byte message page -> kernel (wall clocks)", "median_ms":
          statistics.median(back) * 1e3, "min_ms": min(back) * 1e3}]
for mb in SIZES:
    payload = np.random.default_rng(0).bytes(int(mb * (1 << 20)))
    dev.echo(payload)
    times = []
    for _ in range(max(3, REPS // 4)):
        t, back = dev.echo(payload)
        assert back == payload
        times.append(t)
    med = statistics.median(times)
    rows.append({"what": f"echo {mb:g} MB there and back", "median_ms": med * 1e3,
                 "min_ms": min(times) * 1e3, "MB_per_s": 2 * mb / med})
print(json.dumps({"device": dev.info()["name"], "rows": rows}))
'''


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--sizes", default="1,16", help="echo sizes in MB, comma-separated")
    ap.add_argument("--chromium", default=L.CHROMIUM)
    ap.add_argument("--nodelay", action="store_true",
                    help="TCP_NODELAY on the server's kernel websockets (off in jupyter_server)")
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    from playwright.sync_api import sync_playwright

    sizes = [float(s) for s in args.sizes.split(",") if s]
    with L.start_lab({"bench.ipynb": L.notebook(["let x = 1"])}, nodelay=args.nodelay) as lab, \
            sync_playwright() as p:
        browser = p.chromium.launch(executable_path=args.chromium,
                                    args=L.chromium_args(webgpu=True), headless=True)
        try:
            page = browser.new_page()
            page.set_default_timeout(60_000)
            L.open_notebook(page, lab, "bench.ipynb")
            client = lab.client(lab.kernel_of("bench.ipynb"))
            L.wait_for_device(client)
            code = KERNEL_CODE.replace("REPS", str(args.reps)).replace("SIZES", repr(sizes))
            out = L.run(client, code, timeout=600)
            if out["status"] != "ok":
                raise SystemExit(f"the benchmark failed in the kernel: {out['error']}")
            result = json.loads(out["stdout"].strip().splitlines()[-1])
            client.stop_channels()
        finally:
            browser.close()
    result["browser"] = args.chromium
    result["nodelay"] = args.nodelay
    print(f"browser:0 = {result['device']} (headless Chromium, {args.reps} reps, medians"
          f"{', TCP_NODELAY on the kernel websocket' if args.nodelay else ''})")
    print(f"{'what':50s} {'median ms':>10s} {'min ms':>9s} {'MB/s':>9s}")
    for row in result["rows"]:
        rate = f"{row['MB_per_s']:9.1f}" if "MB_per_s" in row else " " * 9
        print(f"{row['what']:50s} {row['median_ms']:10.2f} {row['min_ms']:9.2f} {rate}")
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2))
    return result


if __name__ == "__main__":
    main()
