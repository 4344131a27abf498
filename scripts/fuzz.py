#!/usr/bin/env python
"""Fuzz the ZynML front end: mutate the example programs and compile every mutant.

Every mutant must either compile or raise a ZynML error that points inside its source
(kind, message, line, column, a caret); anything else (a Python exception, a compile that
runs longer than the time limit) is a failure, printed with the mutant that caused it.

    python scripts/fuzz.py                    # 100,000 mutants, seed 0
    python scripts/fuzz.py -n 5000 --seed 7   # fewer, another seed
    python scripts/fuzz.py --save failures/   # write each failing mutant to a file

The same mutator drives tests/test_fuzz.py (a seeded, time-bounded run in CI).
Exit status: 0 when nothing else happened, 1 otherwise.
"""
from __future__ import annotations

import argparse
import json
import random
import re
import signal
import sys
import time
import traceback
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = sorted((ROOT / "examples").glob("*.zyn"))

# pieces of ZynML (and a few things that are not) to splice in
TOKENS = [
    "{", "}", "(", ")", "[", "]", ":", ",", ".", "..", "...", "|>", "->", "@", "=", "+=",
    "-=", "*=", "/=", "==", "<=", "+", "-", "*", "/", "**", "^", "%", "let", "var", "var var",
    "for", "in", "step", "if", "elif", "else", "and", "or", "not", "yield", "return",
    "compute", "pipeline", "config", "await", "timeout", "shared var", "barrier()", "out",
    "out =", "@kernel", "@kernel reduce(+)", "@kernel reduce(argmax)", "@kernel matmul",
    "@kernel elementwize", "@workgroup(", "@workgroup(0)", "@shared(", "@tile(block_q=64)",
    "@device(\"cpu\")", "@async", "@broadcast(x, axis=1)", "@broadcast(x, axis=9)", "0..n",
    "-inf", "1e-6", "1GB", "1000ms", "0", "-1", "3.5", "2147483648", "99999999999999999999",
    "\"s\"", "'", "\"", "//", "\\\n", "\n", "    ", "\t", "\r\n", "\r", "\x0b", "\x0c", "\x85",
    "\u2028", "x[i]", "x[i, j]", "K[b, h, 0:64]", "(a, b)", "[1, 2]", "[]", "true", "$", "#",
    "λ", "\x00", "i in 0..n,", "sqrtt(", "any([])", "zeros(", "reduce(+, ",
]

OPS = ["delete_char", "duplicate_char", "swap_char", "delete_line", "duplicate_line",
       "swap_line", "indent_line", "dedent_line", "delete_token", "duplicate_token",
       "swap_token", "replace_token", "insert_token", "truncate"]

_TOKEN = re.compile(r"\w+|\.\.\.?|\|>|->|[-+*/=<>!]=|\*\*|//[^\n]*|\S")


def _tokens(src: str) -> list[tuple[int, int]]:
    return [m.span() for m in _TOKEN.finditer(src)]


def mutate(src: str, op: str, a: int, b: int, piece: str) -> str:
    """One mutation of `src`; a and b are arbitrary non-negative numbers that pick places."""
    if op == "truncate":
        return src[:a % (len(src) + 1)]
    if op.endswith("char"):
        if not src:
            return piece
        i, j = a % len(src), b % len(src)
        if op == "delete_char":
            return src[:i] + src[i + 1:]
        if op == "duplicate_char":
            return src[:i] + src[i] + src[i:]
        i, j = min(i, j), max(i, j)
        return src[:i] + src[j] + src[i + 1:j] + src[i] + src[j + 1:] if i != j else src
    if op.endswith("line"):
        lines = src.split("\n")
        i, j = a % len(lines), b % len(lines)
        if op == "delete_line":
            del lines[i]
        elif op == "duplicate_line":
            lines.insert(i, lines[i])
        elif op == "swap_line":
            lines[i], lines[j] = lines[j], lines[i]
        elif op == "indent_line":
            lines[i] = " " * (1 + b % 8) + lines[i]
        else:  # dedent_line
            lines[i] = lines[i][min(1 + b % 8, len(lines[i]) - len(lines[i].lstrip())):]
        return "\n".join(lines)
    spans = _tokens(src)
    if op == "insert_token" or not spans:
        i = a % (len(src) + 1)
        return src[:i] + piece + src[i:]
    (i0, i1), (j0, j1) = spans[a % len(spans)], spans[b % len(spans)]
    if op == "delete_token":
        return src[:i0] + src[i1:]
    if op == "duplicate_token":
        return src[:i1] + " " + src[i0:i1] + src[i1:]
    if op == "replace_token":
        return src[:i0] + piece + src[i1:]
    # swap_token
    if (i0, i1) == (j0, j1):
        return src
    (i0, i1), (j0, j1) = sorted([(i0, i1), (j0, j1)])
    return src[:i0] + src[j0:j1] + src[i1:j0] + src[i0:i1] + src[j1:]


def random_mutant(rng: random.Random, sources: list[str]) -> str:
    """An example with one to four random mutations."""
    src = rng.choice(sources)
    for _ in range(rng.randint(1, 4)):
        src = mutate(src, rng.choice(OPS), rng.randrange(10**6), rng.randrange(10**6),
                     rng.choice(TOKENS))
    return src


class Hang(Exception):
    """A compile ran past the time limit (of CPU time, or ten times it of wall time)."""


def _alarm(signum, frame):
    raise Hang()


def run_on_cpu(source: str):
    """Compile, then run on `cpu` (the --run mode: runtime errors must be ZynML errors too)."""
    import zynbook
    program = zynbook.compile(source)
    if program.free_names:
        return program          # it needs inputs from the host: compiling is what we test
    return zynbook.run(source, device="cpu")


def check_mutant(source: str, compile_fn=None) -> str:
    """'ok' or 'zynml' (an acceptable outcome); raises AssertionError for a ZynML error that
    does not point inside its source; lets other exceptions through."""
    import zynbook
    from zynbook.errors import ZynMLError, source_lines
    compile_fn = compile_fn or zynbook.compile
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            compile_fn(source)
        return "ok"
    except ZynMLError as err:
        assert err.kind and err.message, err
        n_lines = len(source_lines(source))
        assert 1 <= err.line <= max(n_lines, 1) and err.column >= 1, \
            (err.line, err.column, n_lines, err.message)
        rendered = err.render()
        assert isinstance(rendered, str) and err.message in rendered
        if err.source is not None and err.line <= n_lines:
            assert "^" in rendered, rendered
        return "zynml"


def run(n: int, seed: int, limit_s: float = 5.0, save: Path | None = None,
        progress: bool = False, budget_s: float | None = None, execute: bool = False,
        programs: list | None = None) -> dict:
    """Compile `n` mutants (or as many as `budget_s` seconds allow); the counts. With
    `execute`, mutants that compile and need no inputs also run on `cpu`; one that runs
    past the limit is counted as slow (a long program is not a bug), not as a hang."""
    sources = [p.read_text() for p in EXAMPLES]
    rng = random.Random(seed)
    counts = {"mutants": 0, "ok": 0, "zynml": 0, "other": 0, "hang": 0, "slowest_s": 0.0}
    if execute:
        counts["slow"] = 0
    failures = []
    use_alarm = hasattr(signal, "setitimer") and \
        __import__("threading").current_thread() is __import__("threading").main_thread()
    if use_alarm:
        # a hang is `limit_s` of CPU time in one compile (a busy machine that starves the
        # process is not one), or ten times that of wall time (a compile blocked on something)
        old = (signal.signal(signal.SIGPROF, _alarm), signal.signal(signal.SIGALRM, _alarm))
    # the one-time setup (imports, building the grammar's tables) is not a mutant's compile
    if programs is None:
        for source in sources:
            try:
                check_mutant(source)
            except Exception:  # noqa: BLE001 - the examples themselves are tested elsewhere
                pass
    else:
        n = len(programs)      # given programs (a replay of saved failures), not mutants
    start = time.monotonic()
    try:
        for k in range(n):
            if budget_s is not None and time.monotonic() - start > budget_s:
                break
            source = random_mutant(rng, sources) if programs is None else programs[k]
            t0 = time.monotonic()
            try:
                if use_alarm:
                    signal.setitimer(signal.ITIMER_PROF, limit_s)
                    signal.setitimer(signal.ITIMER_REAL, 10 * limit_s)
                try:
                    counts[check_mutant(source, run_on_cpu if execute else None)] += 1
                finally:
                    if use_alarm:
                        signal.setitimer(signal.ITIMER_PROF, 0)
                        signal.setitimer(signal.ITIMER_REAL, 0)
            except Hang:
                if execute:
                    counts["slow"] += 1
                else:
                    counts["hang"] += 1
                    failures.append((source, f"compiling took longer than {limit_s} s"))
            except Exception:      # noqa: BLE001 - anything else is what we look for
                counts["other"] += 1
                failures.append((source, traceback.format_exc()))
            counts["slowest_s"] = max(counts["slowest_s"], time.monotonic() - t0)
            counts["mutants"] += 1
            if progress and (k + 1) % 5000 == 0:
                print(json.dumps(counts), file=sys.stderr, flush=True)
    finally:
        if use_alarm:
            signal.signal(signal.SIGPROF, old[0])
            signal.signal(signal.SIGALRM, old[1])
    counts["seconds"] = round(time.monotonic() - start, 1)
    counts["slowest_s"] = round(counts["slowest_s"], 3)
    counts["failures"] = failures
    if save is not None and failures:
        save.mkdir(parents=True, exist_ok=True)
        for i, (source, why) in enumerate(failures):
            (save / f"mutant_{seed}_{i}.zyn").write_text(source)
            (save / f"mutant_{seed}_{i}.txt").write_text(why)
    return counts


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-n", type=int, default=100_000, help="mutants to compile")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--limit", type=float, default=5.0, help="seconds one compile may take")
    ap.add_argument("--save", type=Path, default=None, help="folder for failing mutants")
    ap.add_argument("--json", type=Path, default=None, help="write the counts here")
    ap.add_argument("--run", action="store_true",
                    help="also run the mutants that need no inputs on `cpu`")
    ap.add_argument("--replay", type=Path, default=None,
                    help="check the .zyn files of this folder (saved failures) instead")
    args = ap.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    programs = None
    if args.replay is not None:
        programs = [p.read_text() for p in sorted(args.replay.glob("*.zyn"))]
    counts = run(args.n, args.seed, args.limit, args.save, progress=True, execute=args.run,
                 programs=programs)
    failures = counts.pop("failures")
    for source, why in failures[:20]:
        print("=" * 72, "\n", source, "\n", "-" * 72, "\n", why, sep="")
    print(json.dumps(counts))
    if args.json:
        args.json.write_text(json.dumps(counts, indent=1))
    return 0 if not failures else 1


if __name__ == "__main__":
    sys.exit(main())
