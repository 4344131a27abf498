"""Run ZynBook's generated MSL on the CPU: compile it as C++20 against `metal_stdlib` (this
folder's model of Metal's library) with a generated harness, execute the dispatches and read
the output back.

What the harness does: it binds every `[[buffer(n)]]` argument of an entry point to the
buffer of that index (inputs loaded from files, output and scratch zeroed, the constant
argument struct packed by `MSLProgram.pack_args`), passes the thread-position builtins the
parameters ask for by their attributes, and runs `grid` threadgroups of `threadgroup`
threads, the threads as real threads meeting at real barriers (see `metal_stdlib`).

Binaries are cached under the temporary directory, keyed by the hash of the preprocessed
source, the harness, the header and the compiler flags.
"""
from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import numpy as np

from zynbook.compiler import errflag

HERE = Path(__file__).parent
HEADER = HERE / "metal_stdlib"
RUNTIME = HERE / "runtime.cpp"
CXX = os.environ.get("CXX", "g++")
FLAGS = ["-std=c++20", "-O1", "-pthread"]
CACHE = Path(os.environ.get("ZYNBOOK_METAL_EMU_CACHE",
                            Path(tempfile.gettempdir()) / "zynbook-metal-emu"))

NP_DTYPES = {"f16": np.float16, "bf16": np.uint16, "f32": np.float32, "i8": np.int8,
             "i16": np.int16, "i32": np.int32, "i64": np.int64, "u8": np.uint8,
             "u16": np.uint16, "u32": np.uint32, "u64": np.uint64, "bool": np.bool_}

BUILTIN_IDS = {
    "thread_position_in_threadgroup": "id.tid",
    "threadgroup_position_in_grid": "id.gid",
    "threadgroups_per_grid": "id.ngroups",
    "threads_per_threadgroup": "id.ntg",
    "thread_index_in_simdgroup": "id.lane",
    "simdgroup_index_in_threadgroup": "id.sg",
    "simdgroups_per_threadgroup": "id.nsg",
    "threads_per_simdgroup": "32u",
    "thread_position_in_grid": "(id.gid * id.ntg + id.tid)",
    "threads_per_grid": "(id.ngroups * id.ntg)",
}

# C and CUDA habits that Metal refuses, checked on the text (the header poisons the rest)
FORBIDDEN = [(r"\blong\s+long\b", "`long long` (Metal's 64-bit integer is `long`)"),
             (r"\bdouble\b", "`double` (Metal has no 64-bit floats)"),
             (r"\b__\w+__\b|\b__(syncthreads|shfl\w*)\b", "a CUDA keyword"),
             (r"\bstatic\b", "`static` (not allowed in Metal kernels)"),
             (r"#include\s*<(?!metal_stdlib>)", "an include other than <metal_stdlib>")]


class EmulatorError(Exception):
    pass


def lint(source: str):
    # comments quote the ZynML source; blanked, so positions stay those of `source`
    code = re.sub(r"//[^\n]*", lambda m: " " * len(m.group()), source)
    for pattern, what in FORBIDDEN:
        m = re.search(pattern, code)
        if m:
            line = source[:m.start()].count("\n") + 1
            raise EmulatorError(f"the MSL uses {what} at line {line}: "
                                f"{source.splitlines()[line - 1].strip()}")


def parse_entries(source: str) -> dict:
    """{entry name: [(parameter text without attribute, attribute or None)]}"""
    out = {}
    for m in re.finditer(r"^kernel void (\w+)\((.*?)\)\s*\{", source, re.S | re.M):
        params = []
        for p in _split_params(m.group(2)):
            am = re.search(r"\[\[\s*(\w+)(?:\((\d+)\))?\s*\]\]\s*$", p)
            attr = (am.group(1), int(am.group(2)) if am.group(2) else None) if am else None
            params.append((p[:am.start()].strip() if am else p.strip(), attr))
        out[m.group(1)] = params
    return out


def _split_params(text: str) -> list:
    parts, depth, cur = [], 0, ""
    for ch in text:
        if ch in "(<[":
            depth += 1
        elif ch in ")>]":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    if cur.strip():
        parts.append(cur)
    return [p.strip() for p in parts]


def preprocess(source: str) -> str:
    """MSL -> the C++ the header accepts: attributes dropped, threadgroup arrays static."""
    lint(source)
    text = re.sub(r"\[\[\s*\w+(?:\(\d+\))?\s*\]\]", "", source)
    text = re.sub(r"^(\s*)threadgroup\s+([\w:]+\s+\w+(?:\[\d+\])+;)\s*$", r"\1static \2",
                  text, flags=re.M)
    return text


_QUALIFIERS = re.compile(r"\b(device|constant|thread|threadgroup)\b\s*")


def _argument(decl: str, attr, n_slots: set) -> str:
    if attr is None:
        raise EmulatorError(f"entry-point parameter without an attribute: {decl}")
    name, index = attr
    if name == "buffer":
        if index not in n_slots:
            raise EmulatorError(f"[[buffer({index})]] is bound to no buffer")
        plain = _QUALIFIERS.sub("", decl)
        m = re.match(r"(.*?)([&*])\s*(\w+)$", plain)
        if not m:
            raise EmulatorError(f"cannot read buffer parameter `{decl}`")
        base, ref = m.group(1).strip(), m.group(2)
        if ref == "*":
            return f"({base}*)zyn_bufs[{index}]"
        return f"*({base}*)zyn_bufs[{index}]"
    if name in BUILTIN_IDS:
        return BUILTIN_IDS[name]
    raise EmulatorError(f"attribute [[{name}]] is not modelled by the emulator")


def harness(program, source: str) -> str:
    entries = parse_entries(source)
    nslots = len(program.slots)
    indices = {s.index for s in program.slots}
    lines = ['#include "kernel.metal"',
             "#include <cstdio>",
             "static void* zyn_bufs[%d];" % max(nslots, 1),
             "static size_t zyn_bytes[%d];" % max(nslots, 1),
             "int main(int argc, char** argv) {",
             "    char path[4096];",
             f"    for (int n = 0; n < {nslots}; ++n) {{",
             '        std::snprintf(path, sizeof path, "%s/buf%d.bin", argv[1], n);',
             '        FILE* f = std::fopen(path, "rb");',
             "        if (!f) { std::perror(path); return 2; }",
             "        std::fseek(f, 0, SEEK_END); zyn_bytes[n] = (size_t)std::ftell(f); std::fseek(f, 0, SEEK_SET);",
             "        zyn_bufs[n] = std::aligned_alloc(64, (zyn_bytes[n] + 63) / 64 * 64 + 64);",
             "        if (std::fread(zyn_bufs[n], 1, zyn_bytes[n], f) != zyn_bytes[n]) return 2;",
             "        std::fclose(f);",
             "    }"]
    for d in program.dispatches:
        if d.entry not in entries:
            raise EmulatorError(f"entry point `{d.entry}` is not in the source")
        args = [_argument(decl, attr, indices) for decl, attr in entries[d.entry]]
        lines.append(f"    zyn_emu::run({d.grid}u, {d.threadgroup}u, [&](const zyn_emu::Ids& id) {{")
        lines.append(f"        {d.entry}({', '.join(args)});")
        lines.append("    });")
    out = next(s.index for s in program.slots if s.role == "output")
    lines += [f'    std::snprintf(path, sizeof path, "%s/out.bin", argv[1]);',
              '    FILE* f = std::fopen(path, "wb");',
              f"    std::fwrite(zyn_bufs[{out}], 1, zyn_bytes[{out}], f);",
              "    std::fclose(f);"]
    for s in program.slots:
        if s.role == "error":           # the error flag (zynbook/compiler/errflag.py)
            lines += [f'    std::snprintf(path, sizeof path, "%s/err.bin", argv[1]);',
                      '    f = std::fopen(path, "wb");',
                      f"    std::fwrite(zyn_bufs[{s.index}], 1, zyn_bytes[{s.index}], f);",
                      "    std::fclose(f);"]
    lines += [
              "    return 0;",
              "}"]
    return "\n".join(lines) + "\n"


def _pch_dir() -> Path:
    """The header, its precompiled form and the compiled runtime in the cache, keyed by
    their content."""
    text = HEADER.read_bytes() + RUNTIME.read_bytes()
    key = hashlib.sha256(text + " ".join([CXX] + FLAGS).encode()).hexdigest()[:16]
    d = CACHE / f"include-{key}"
    if not (d / "metal_stdlib.gch").exists():
        tmp = Path(tempfile.mkdtemp(dir=CACHE if CACHE.exists() else None))
        shutil.copy(HEADER, tmp / "metal_stdlib")
        r = subprocess.run([CXX] + FLAGS + ["-x", "c++-header", str(tmp / "metal_stdlib"),
                                            "-o", str(tmp / "metal_stdlib.gch")],
                           capture_output=True, text=True)
        if r.returncode != 0:
            raise EmulatorError("the Metal header does not compile:\n" + r.stderr[-4000:])
        r = subprocess.run([CXX] + FLAGS + ["-c", str(RUNTIME), "-I", str(tmp),
                                            "-o", str(tmp / "runtime.o")],
                           capture_output=True, text=True)
        if r.returncode != 0:
            raise EmulatorError("the Metal model's runtime does not compile:\n" + r.stderr[-4000:])
        try:
            tmp.rename(d)
        except OSError:             # built concurrently by another process
            shutil.rmtree(tmp, ignore_errors=True)
    return d


def build(program, source: str | None = None) -> Path:
    """Compile `program` (an MSLProgram; `source` overrides its text) to an executable."""
    CACHE.mkdir(parents=True, exist_ok=True)
    source = program.source if source is None else source
    cpp = preprocess(source)
    main = harness(program, source)
    inc = _pch_dir()
    key = hashlib.sha256("\0".join([cpp, main, str(inc), CXX] + FLAGS).encode()).hexdigest()[:24]
    exe = CACHE / f"k-{key}"
    if exe.exists():
        return exe
    work = Path(tempfile.mkdtemp(dir=CACHE))
    try:
        (work / "kernel.metal").write_text(cpp)
        (work / "main.cpp").write_text(main)
        r = subprocess.run([CXX] + FLAGS + ["-I", str(inc), "-Winvalid-pch", str(work / "main.cpp"),
                                            str(inc / "runtime.o"), "-o", str(work / "a.out")],
                           capture_output=True, text=True)
        if r.returncode != 0:
            raise EmulatorError("the MSL does not compile against the Metal model:\n"
                                + r.stderr[-6000:])
        os.replace(work / "a.out", exe)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return exe


def to_storage(array, dtype: str) -> bytes:
    a = np.ascontiguousarray(array)
    if dtype == "bf16":
        f = a.astype(np.float32).view(np.uint32)
        rounded = f + np.uint32(0x7FFF) + ((f >> np.uint32(16)) & np.uint32(1))
        return (rounded >> np.uint32(16)).astype(np.uint16).tobytes()
    return a.astype(NP_DTYPES[dtype]).tobytes()


def from_storage(data: bytes, dtype: str, shape) -> np.ndarray:
    if dtype == "bf16":
        bits = np.frombuffer(data, np.uint16).astype(np.uint32) << np.uint32(16)
        return bits.view(np.float32).reshape(shape)
    return np.frombuffer(data, NP_DTYPES[dtype]).reshape(shape).copy()


def run(program, inputs: list, out_shape: tuple, scalars: dict | None = None,
        source: str | None = None, timeout: float = 120, kernel=None,
        sizes: dict | None = None) -> np.ndarray:
    """Execute `program` on `inputs` (numpy arrays in kernel-input order); the output array.
    A failure the kernel reports through its error flag raises ZynMLRuntimeError (`kernel`,
    when given, places it in the ZynML source; `sizes`, the launch's, give its extents)."""
    exe = build(program, source)
    scalars = scalars or {}
    with tempfile.TemporaryDirectory(dir=CACHE) as d:
        it = iter(inputs)
        out_slot = None
        for s in program.slots:
            if s.role == "input":
                data = to_storage(next(it), s.dtype)
            elif s.role == "output":
                n = int(np.prod(out_shape)) if out_shape else 1
                data = bytes(n * np.dtype(NP_DTYPES[s.dtype]).itemsize)
                out_slot = s
            elif s.role == "scratch":
                data = bytes(max(1, s.count) * 8)
            elif s.role == "error":
                data = bytes(4 * max(1, s.count))
            else:
                data = program.pack_args(scalars)
            Path(d, f"buf{s.index}.bin").write_bytes(data or b"\0")
        r = subprocess.run([str(exe), d], capture_output=True, text=True, timeout=timeout)
        if r.returncode != 0:
            raise EmulatorError(f"the emulated kernel failed ({r.returncode}): {r.stderr[-2000:]}")
        data = Path(d, "out.bin").read_bytes()
        if Path(d, "err.bin").exists():
            words = np.frombuffer(Path(d, "err.bin").read_bytes()[:8], np.int32)
            errflag.raise_if_failed(getattr(program, "error_sites", ()), words, kernel, sizes)
    n = int(np.prod(out_shape)) if out_shape else 1
    item = np.dtype(NP_DTYPES[out_slot.dtype]).itemsize
    return from_storage(data[:n * item], out_slot.dtype, out_shape)
