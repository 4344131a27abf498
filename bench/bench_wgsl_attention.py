"""Masked attention on WebGPU: the old hand-written WGSL against the generated one, and
variants of the generated one that each change one difference between them.

    python3 bench/bench_wgsl_attention.py --out DIR [--small] [--reps 20] [--rounds 3]
                        [--adapter SUBSTR] [--old PATH] [--ours PATH] [--no-zynbook]

Files: bench/wgsl/old_attention.wgsl (the deleted renderer's `attention`, kept as the
reference the generated kernel is timed against); --ours PATH, a generated one, for when
zynbook is not importable. When zynbook imports (repository root = this script's parent, or cwd), the
generated source is taken from the device itself (dev.generated_source), so the variants
edit exactly what ZynBook launches on that adapter, and one more row times ZynBook's own
launch path. Every row runs the d64 (or d32/d128) entry point on the same buffers,
timed with timestamp queries around each dispatch (one pass per dispatch, 1 tick = 1 ns
as zynbook/backends/webgpu/device.py assumes); the median over reps*rounds after warm-up,
rows interleaved round by round. Outputs are checked against numpy: once with the
bench's all-ones mask (the timed run) and once with a random mask.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import re
import statistics
import sys
import time
from pathlib import Path

import numpy as np

os.environ.setdefault("XDG_RUNTIME_DIR", "/tmp")
import wgpu  # noqa: E402

HERE = Path(__file__).resolve().parent
NEG_INF = "bitcast<f32>(0xff800000u)"


# ----------------------------------------------------------------------------- variants
# Each: (name, what it changes, function source -> source). A variant whose edit matches
# nothing is reported as "n/a" rather than timed (the generated text changed).

def _sub(pattern, repl, flags=0):
    def f(src):
        new, n = re.subn(pattern, repl, src, flags=flags)
        return new if n else None
    return f


def _builtin_max(src):
    # old: max(); ours: zyn_max_f32 (NaN-propagating: two isnan bit tests and two selects)
    return _sub(r"(?<!fn )zyn_max_f32\(", "max(")(src)


def _fma_pv(src):
    # old: o = fma(vec4(p), V, o); ours: o = (o + (vec4(p) * V))
    return _sub(r"(_o_\d+) = \(\1 \+ \((vec4<f32>\(_p_\d+\)) \* (_kv\[[^\]]+\])\)\);",
                r"\1 = fma(\2, \3, \1);")(src)


def _scale_scores(src):
    # old: Q unscaled, each score dot * scale; ours: Q rows scaled once when loaded
    s = _sub(r" \* vec4<f32>\(_scale\)\);", ");")(src)
    return s and _sub(r"(_s_\d+) = select\(" + re.escape(NEG_INF) + r", (_dot_\d+), ",
                      r"\1 = select(" + NEG_INF + r", (\2 * _scale), ")(s)


def _mask_no_short_circuit(src):
    # `a && mask[..] != 0` branches around the mask load (WGSL && short-circuits); `&` does not
    return _sub(r"\) && \(u_mask\[", ") & (u_mask[")(src)


def _mask_unclamped(src):
    # ours clamps the key index (min(j, SK-1)) for the mask read; old indexed mask with j
    return _sub(r"u_mask\[\(\(_qc \* u_mask_d1\) \+ _jc_(\d+)\)\]",
                r"u_mask[((_qc * u_mask_d1) + min(_j_\1, u_mask_d1 - 1i))]")(src)


def _kv_544(src):
    # old d64 tile array: 2 x 16 rows x 17 vec4 = 544; ours one 576-entry array for all entries
    return _sub(r"var<workgroup> _kv: array<vec4<f32>, 576>;",
                "var<workgroup> _kv: array<vec4<f32>, 544>;")(src)


def _flat_loader(src):
    # old loader: one loop over the tile's 256 vec4 slots (e = t; e < 256; e += 128);
    # ours: two nested loops (rows from t/16 step 8, columns from t%16 step 16)
    return _sub(r"for \(var _row: i32 = _frow; _row < (\d+)i; _row \+= (\d+)i\) \{\n(\s*)"
                r"for \(var _col: i32 = _fcol; _col < (\d+)i; _col \+= \4i\) \{",
                lambda m: (f"for (var _e: i32 = _t; _e < {int(m[1]) * int(m[4])}i; "
                           f"_e += {int(m[2]) * int(m[4])}i) {{ let _row: i32 = _e / {m[4]}i;\n"
                           f"{m[3]}{{ let _col: i32 = _e % {m[4]}i;"))(src)


def _no_row_select(src):
    # ours zeroes K/V rows past the keys (select on k0 + row < SK); old relied on the
    # clamped row and the score's key test only
    return _sub(r"select\(vec4<f32>\(0\.0f\), (vec4<f32>\(u_[KV]\[.*?\]\)), \(\(_k0 \+ _row\) < _SK\)\)",
                r"\1")(src)


def _native_div(src):
    # ours: signed division through abs/bitcast/unsigned (C truncation); old: WGSL / and %
    s = _sub(r"fn zyn_tdiv\(a: i32, b: i32\) -> i32 \{\n.*?\n.*?\}",
             "fn zyn_tdiv(a: i32, b: i32) -> i32 { return a / b; }", re.S)(src)
    return s and _sub(r"fn zyn_trem\(a: i32, b: i32\) -> i32 \{\n.*?\n.*?\}",
                      "fn zyn_trem(a: i32, b: i32) -> i32 { return a % b; }", re.S)(s)


def _barrier_at_end(src):
    # ours: barrier at the top of each key-tile iteration; old: at the end of it. The
    # closing brace of the tile loop is found by brace matching.
    m = re.search(r"(for \(var _k0: i32 = 0i; _k0 < _SK; _k0 \+= \d+i\) \{\n)(\s*)workgroupBarrier\(\);\n",
                  src)
    if not m:
        return None
    out, pos = [], 0
    while m:
        start = m.end()
        depth, i = 1, start
        while depth:
            depth += {"{": 1, "}": -1}.get(src[i], 0)
            i += 1
        close = i - 1   # the loop's closing brace
        body = src[start:close]
        stripped = body.rstrip(" ")
        out.append(src[pos:m.start()] + m[1] + stripped + m[2] + "workgroupBarrier();\n"
                   + body[len(stripped):])
        pos = close
        m = re.compile(r"(for \(var _k0: i32 = 0i; _k0 < _SK; _k0 \+= \d+i\) \{\n)(\s*)workgroupBarrier\(\);\n").search(src, pos)
    out.append(src[pos:])
    return "".join(out)


def _exp2(src):
    # not a difference: exp2 with log2(e) folded into the Q scale (the CUDA schedule's form)
    s = _sub(r"let _scale: f32 = \(1\.0f / sqrt\(f32\(u_head_dim\)\)\);",
             "let _scale: f32 = (1.4426950408889634f / sqrt(f32(u_head_dim)));")(src)
    return s and _sub(r"\bexp\(", "exp2(")(s)


VARIANTS = [
    ("max", "zyn_max_f32 -> builtin max", _builtin_max),
    ("fma", "PV: o + vec4(p) * V -> fma(vec4(p), V, o)", _fma_pv),
    ("scale", "scale each score, not the Q row", _scale_scores),
    ("mask&", "mask test: && -> & (no branch around the load)", _mask_no_short_circuit),
    ("maskidx", "mask index: _jc (clamped once) -> min inline", _mask_unclamped),
    ("kv544", "workgroup _kv 576 -> 544 vec4 (old d64 size)", _kv_544),
    ("loader", "K/V tile loader: nested row/col loops -> one flat loop", _flat_loader),
    ("norowsel", "K/V loader: drop the select on rows past the keys", _no_row_select),
    ("div", "zyn_tdiv/zyn_trem -> native / %", _native_div),
    ("barrier", "tile-loop barrier at the end instead of the start", _barrier_at_end),
    ("exp2", "exp -> exp2, log2(e) in the scale (not a difference)", _exp2),
]
ALL_BUT = ("exp2", "maskidx")   # left out of the combined row


# ----------------------------------------------------------------------------- device


def pick_adapter(substr):
    ads = list(wgpu.gpu.enumerate_adapters_sync())
    rank = {"DiscreteGPU": 0, "IntegratedGPU": 1, "VirtualGPU": 2, "CPU": 3}
    ads = [a for a in ads if a.info.get("backend_type") == "Vulkan"] or ads
    if substr:
        ads = [a for a in ads if substr.lower() in a.info.get("device", "").lower()] or ads
    ads.sort(key=lambda a: rank.get(a.info.get("adapter_type"), 4))
    return ads[0]


class Runner:
    def __init__(self, adapter):
        self.adapter = adapter
        feats = [f for f in ("timestamp-query",) if f in adapter.features]
        lim = adapter.limits
        req = {k: lim[k] for k in ("max-storage-buffer-binding-size", "max-buffer-size",
                                   "max-compute-workgroup-storage-size") if k in lim}
        self.device = adapter.request_device_sync(required_features=feats, required_limits=req)
        self.timestamps = "timestamp-query" in feats

    def buffer(self, data=None, nbytes=None, usage=None):
        U = wgpu.BufferUsage
        usage = usage or (U.STORAGE | U.COPY_SRC | U.COPY_DST)
        nbytes = data.nbytes if data is not None else nbytes
        buf = self.device.create_buffer(size=max(16, (nbytes + 15) // 16 * 16), usage=usage)
        if data is not None:
            self.device.queue.write_buffer(buf, 0, np.ascontiguousarray(data).tobytes())
        return buf

    def pipeline(self, source, entry):
        """The seven bindings both renderers declare: Q, K, V, mask (read), out, error flag
        (read_write), params (uniform); an explicit layout, so an unused one still binds."""
        B = wgpu.BufferBindingType
        kinds = [B.read_only_storage] * 4 + [B.storage] * 2 + [B.uniform]
        self.layout = self.device.create_bind_group_layout(entries=[
            {"binding": i, "visibility": wgpu.ShaderStage.COMPUTE, "buffer": {"type": t}}
            for i, t in enumerate(kinds)])
        module = self.device.create_shader_module(code=source)
        return self.device.create_compute_pipeline(
            layout=self.device.create_pipeline_layout(bind_group_layouts=[self.layout]),
            compute={"module": module, "entry_point": entry})

    def bind(self, pipe, buffers):
        return self.device.create_bind_group(layout=self.layout, entries=[
            {"binding": i, "resource": {"buffer": b, "offset": 0, "size": b.size}}
            for i, b in buffers.items()])

    def time(self, pipe, group, workgroups, reps):
        """Seconds of each of `reps` dispatches (one pass each, timestamps around it)."""
        enc = self.device.create_command_encoder()
        qset = self.device.create_query_set(type="timestamp", count=2 * reps) if self.timestamps else None
        for n in range(reps):
            tw = ({"query_set": qset, "beginning_of_pass_write_index": 2 * n,
                   "end_of_pass_write_index": 2 * n + 1} if qset else None)
            p = enc.begin_compute_pass(timestamp_writes=tw)
            p.set_pipeline(pipe)
            p.set_bind_group(0, group)
            p.dispatch_workgroups(workgroups, 1, 1)
            p.end()
        if qset:
            U = wgpu.BufferUsage
            tsbuf = self.buffer(nbytes=16 * reps, usage=U.QUERY_RESOLVE | U.COPY_SRC)
            enc.resolve_query_set(qset, 0, 2 * reps, tsbuf, 0)
        t0 = time.perf_counter()
        self.device.queue.submit([enc.finish()])
        if qset:
            raw = np.frombuffer(self.device.queue.read_buffer(tsbuf), dtype=np.uint64)
            return [(int(raw[2 * i + 1]) - int(raw[2 * i])) * 1e-9 for i in range(reps)]
        self.sync()
        return [(time.perf_counter() - t0) / reps] * reps

    def sync(self):
        f = self.buffer(nbytes=16)
        self.device.queue.read_buffer(f, 0, 4)

    def read(self, buf, n, dtype=np.float32):
        return np.frombuffer(self.device.queue.read_buffer(buf), dtype=dtype, count=n).copy()


# ----------------------------------------------------------------------------- kernels


def struct_fields(source, struct):
    m = re.search(r"struct " + struct + r" \{(.*?)\}", source, re.S)
    return [(n.strip(), t.strip()) for n, t in re.findall(r"(\w+)\s*:\s*(\w+)\s*,", m[1])]


def pack(fields, values):
    """Uniform struct of scalars (all 4 bytes), size rounded to 16."""
    words = []
    for name, t in fields:
        if name not in values:
            raise KeyError(f"no value for uniform field {name}")
        words.append(np.array([values[name]], {"i32": "<i4", "u32": "<u4", "f32": "<f4"}[t]).tobytes())
    data = b"".join(words)
    return np.frombuffer(data + bytes(-len(data) % 16), np.uint8)


def uniform_values(shape):
    b, h, s, d = shape
    v = {"batch": b, "heads": h, "seq_len": s, "head_dim": d, "mask_d0": s, "mask_d1": s,
         "z_n_b": b, "z_n_h": h, "z_n_i": s, "z_n_keys": s}
    for a in ("Q", "K", "V", "out"):
        for i, x in enumerate(shape):
            v[f"{a}_d{i}"] = x
    v.update({"u_" + k: x for k, x in list(v.items())})
    return v


def entry_suffix(d):
    return "d32" if d <= 32 else "d64" if d <= 64 else "d128"


def queries_per_workgroup(source, entry):
    """The query block of an entry point, read from its workgroup decomposition
    (ours: zyn_tdiv((u_seq_len + 31i), 32i); old: (P.z_n_i + 31i) / 32i)."""
    body = source[source.index(f"fn {entry}("):]
    m = re.search(r"seq_len \+ \d+i\), (\d+)i\)|z_n_i \+ \d+i\) / (\d+)i", body)
    return int(m[1] or m[2])


def reference(Q, K, V, mask):
    d = Q.shape[-1]
    s = np.einsum("bhid,bhjd->bhij", Q.astype(np.float64), K.astype(np.float64)) / math.sqrt(d)
    s = np.where(mask, s, -np.inf)
    m = s.max(-1, keepdims=True)
    p = np.where(mask, np.exp(s - np.where(np.isfinite(m), m, 0)), 0.0)
    l = p.sum(-1, keepdims=True)
    return np.einsum("bhij,bhjd->bhid", np.where(l > 0, p / np.where(l > 0, l, 1), 0), V)


class Case:
    """One WGSL source: its pipeline and bind group over shared buffers."""

    def __init__(self, run, name, what, source, entry_prefix, uniform_struct, shape, bufs):
        self.name, self.what, self.source = name, what, source
        entry = entry_prefix + entry_suffix(shape[3])
        b, h, s, _ = shape
        self.workgroups = b * h * -(-s // queries_per_workgroup(source, entry))
        self.pipe = run.pipeline(source, entry)
        ubuf = run.buffer(pack(struct_fields(source, uniform_struct), uniform_values(shape)),
                          usage=wgpu.BufferUsage.UNIFORM | wgpu.BufferUsage.COPY_DST)
        self.out = run.buffer(nbytes=4 * b * h * s * shape[3])
        self.err = run.buffer(np.zeros(16, np.int32))
        self.groups = {m: run.bind(self.pipe, {0: bufs["Q"], 1: bufs["K"], 2: bufs["V"],
                                               3: bufs[m], 4: self.out, 5: self.err, 6: ubuf})
                       for m in ("ones", "random")}
        self.times = []


def zynbook_row(shape, arrays, reps, adapter_substr):
    """(source ZynBook generates on this adapter, its launch times) or (None, reason)."""
    for root in (HERE.parent, HERE.parent.parent, Path.cwd()):
        if (root / "zynbook").is_dir() and (root / "tests" / "kernel_sources.py").exists():
            sys.path[:0] = [str(root), str(root / "tests")]
            break
    try:
        from compute_testing import lower_block
        from kernel_sources import ATTENTION
        from zynbook.backends.webgpu import discover
    except Exception as exc:
        return None, None, f"zynbook not importable: {exc}"
    devs = [d for d in discover() if d.id.startswith("vulkan")] or discover()
    if adapter_substr:
        devs = [d for d in devs if adapter_substr.lower() in d.name.lower()] or devs
    dev = devs[0]
    k, ins, sz, sc = lower_block(ATTENTION, arrays, {})
    source = dev.generated_source(k, sz)["wgsl"]
    # the same program under WebGPU's guaranteed 16 KB of workgroup memory, which is what
    # a render without the adapter's limits (notes' dumps, the old renderer's tiles) gives
    import dataclasses
    from zynbook.compiler.codegen import wgsl as zwgsl
    small = zwgsl.render(k, dataclasses.replace(dev.specialised(k, sz), max_workgroup_storage=16384)).source
    resident = [dev.from_host(a) for a in ins]
    for _ in range(3):
        dev.launch(k, resident, sz, sc, keep_on_device=True)
    times, out = [], None
    for _ in range(reps):
        out, launch = dev.launch(k, resident, sz, sc, keep_on_device=True)
        times.append(launch.times.kernel)
    value = dev.to_host(out)
    return (source, small), (times, value, launch.times.source, dev.id), None


# ----------------------------------------------------------------------------- main


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--small", action="store_true", help="shape [1, 2, 128, 64] (CPU adapters)")
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--adapter", default="", help="substring of the adapter's device name")
    ap.add_argument("--old", default=str(HERE / "wgsl" / "old_attention.wgsl"))
    ap.add_argument("--ours", default=str(HERE / "wgsl" / "ours_attention.wgsl"))
    ap.add_argument("--no-zynbook", action="store_true")
    args = ap.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    t_start = time.perf_counter()

    shape = (1, 2, 128, 64) if args.small else (2, 12, 512, 64)
    b, h, s, d = shape
    rng = np.random.default_rng(0)
    Q, K, V = (rng.standard_normal(shape).astype(np.float32) for _ in range(3))
    ones = np.ones((s, s), bool)
    rmask = rng.random((s, s)) < 0.7
    rmask[np.arange(s), rng.integers(0, s, s)] = True
    rmask[:3, :] = False            # rows with no key at all: output 0
    ref = {"ones": reference(Q, K, V, ones), "random": reference(Q, K, V, rmask)}

    zb_source, zb, zb_why = (None, None, "--no-zynbook")
    if not args.no_zynbook:
        zb_source, zb, zb_why = zynbook_row(shape, {"Q": Q, "K": K, "V": V, "mask": ones},
                                            args.reps, args.adapter)
    ours, ours16 = zb_source or (Path(args.ours).read_text(), Path(args.ours).read_text())
    ours_from = "zynbook on this adapter" if zb_source else f"{args.ours} ({zb_why})"

    run = Runner(pick_adapter(args.adapter))
    info = run.adapter.info
    print(f"adapter: {info.get('device')} ({info.get('backend_type')}), timer: "
          f"{'gpu-timestamps' if run.timestamps else 'host-clock'}; shape {list(shape)}; "
          f"generated source: {ours_from}", flush=True)
    print(f"  launched: {ours.splitlines()[0][:400]}\n  16 KB:    {ours16.splitlines()[0][:400]}", flush=True)
    bufs = {"Q": run.buffer(Q), "K": run.buffer(K), "V": run.buffer(V),
            "ones": run.buffer(ones.astype(np.uint32)), "random": run.buffer(rmask.astype(np.uint32))}

    specs = [("old", "hand-written WGSL (deleted renderer)", Path(args.old).read_text(), "kernel_", "Params"),
             ("ours", "generated, as ZynBook renders it", ours, "zyn_k_kernel_", "ZynParams")]
    skipped = []
    combined = ours
    for name, what, fn in VARIANTS:
        src = fn(ours)
        if src is None:
            skipped.append((name, what))
            continue
        specs.append((name, what, src, "zyn_k_kernel_", "ZynParams"))
        if name not in ALL_BUT:
            combined = fn(combined) or combined
    specs.append(("all", "every variant above but " + ", ".join(ALL_BUT), combined,
                  "zyn_k_kernel_", "ZynParams"))
    # the schedule's tile sizes follow the adapter's workgroup-memory limit; the old
    # renderer's were those of 16 KB (d64: 16-key tiles, 4 keys a step)
    specs.append(("ours16k", "generated with max_workgroup_storage=16384 (smaller K/V tiles)",
                  ours16, "zyn_k_kernel_", "ZynParams"))
    combined16 = ours16
    for name, what, fn in VARIANTS:
        if name not in ALL_BUT:
            combined16 = fn(combined16) or combined16
    specs.append(("all16k", "ours16k with every variant but " + ", ".join(ALL_BUT), combined16,
                  "zyn_k_kernel_", "ZynParams"))

    cases, failed = [], []
    for name, what, src, prefix, ustruct in specs:
        (out / f"{name}.wgsl").write_text(src)
        try:
            cases.append(Case(run, name, what, src, prefix, ustruct, shape, bufs))
        except Exception as exc:
            failed.append((name, what, str(exc).splitlines()[0][:200]))
            print(f"  {name}: did not compile: {failed[-1][2]}", flush=True)

    # correctness: random mask first, then the timed all-ones run leaves its output
    for c in cases:
        for m in ("random", "ones"):
            run.time(c.pipe, c.groups[m], c.workgroups, 1)
            got = run.read(c.out, b * h * s * d).reshape(shape)
            setattr(c, f"err_{m}", float(np.max(np.abs(got - ref[m]))) if np.all(np.isfinite(got)) else float("inf"))
        c.flag = run.read(c.err, 2, np.int32).tolist()
    for c in cases:   # warm-up
        run.time(c.pipe, c.groups["ones"], c.workgroups, 3)
    for _ in range(args.rounds):
        for c in cases:
            c.times += run.time(c.pipe, c.groups["ones"], c.workgroups, args.reps)

    rows = []
    base = next((statistics.median(c.times) for c in cases if c.name == "ours"), None)
    tol = 1e-3
    print(f"\n{'row':<10}{'median ms':>10}{'min ms':>9}{'vs ours':>9}{'err ones':>10}{'err rand':>10}  ok  change")
    if zb:
        times, value, source, devid = zb
        e = float(np.max(np.abs(value - ref["ones"])))
        med = statistics.median(times)
        print(f"{'zynbook':<10}{med * 1e3:10.4f}{min(times) * 1e3:9.4f}{'':>9}{e:10.2e}{'-':>10}  "
              f"{'yes' if e < tol else 'NO '} dev.launch on {devid} ({source}), reps={len(times)}")
        rows.append({"row": "zynbook", "median_ms": med * 1e3, "min_ms": min(times) * 1e3,
                     "err_ones": e, "timer": source})
    for c in cases:
        med = statistics.median(c.times)
        ok = c.err_ones < tol and c.err_random < tol and c.flag == [0, 0]
        rel = f"{med / base:9.3f}" if base else f"{'-':>9}"
        print(f"{c.name:<10}{med * 1e3:10.4f}{min(c.times) * 1e3:9.4f}{rel}{c.err_ones:10.2e}"
              f"{c.err_random:10.2e}  {'yes' if ok else 'NO '} {c.what}"
              + ("" if c.flag == [0, 0] else f"  (error flag {c.flag})"))
        rows.append({"row": c.name, "change": c.what, "median_ms": med * 1e3,
                     "min_ms": min(c.times) * 1e3, "err_ones": c.err_ones,
                     "err_random": c.err_random, "error_flag": c.flag, "ok": ok,
                     "times_ms": [t * 1e3 for t in c.times]})
    for name, what in skipped:
        print(f"{name:<10}{'n/a':>10}   (the edit matched nothing in the generated source) {what}")
    for name, what, why in failed:
        print(f"{name:<10}{'FAIL':>10}   (did not compile: {why}) {what}")
    (out / "wgsl_exp.json").write_text(json.dumps({
        "adapter": dict(info), "shape": list(shape), "timer": "gpu-timestamps" if run.timestamps else "host-clock",
        "generated_source": ours_from, "rows": rows, "skipped": skipped, "failed": failed}, indent=1, default=str))
    print(f"\n{time.perf_counter() - t_start:.1f} s; sources and wgsl_exp.json in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
