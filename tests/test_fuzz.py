"""Mutated example programs either compile or fail with a ZynML error: never a Python
exception of any other kind (principle 4: no traceback reaches a notebook)."""
from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import zynbook

_spec = importlib.util.spec_from_file_location(
    "zynbook_fuzz", Path(__file__).resolve().parents[1] / "scripts" / "fuzz.py")
fuzz = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(fuzz)

EXAMPLES = fuzz.EXAMPLES
SOURCES = [p.read_text() for p in EXAMPLES]
mutate = fuzz.mutate
check_mutant = fuzz.check_mutant

# mutants per CI run (scripts/fuzz.py runs 100,000 on demand); ZYNBOOK_FUZZ_SEED picks others
FUZZ_MUTANTS = int(os.environ.get("ZYNBOOK_FUZZ_MUTANTS", "5000"))
FUZZ_SEED = int(os.environ.get("ZYNBOOK_FUZZ_SEED", "20261122"))


def test_mutated_examples_compile_or_raise_zynml_errors():
    """A seeded run: every mutant compiles or raises a ZynML error inside its source, and no
    compile takes longer than 5 s."""
    counts = fuzz.run(FUZZ_MUTANTS, FUZZ_SEED, limit_s=5.0)
    failures = counts.pop("failures")
    assert counts["mutants"] == FUZZ_MUTANTS
    report = "\n\n".join(f"{src!r}\n{why}" for src, why in failures[:5])
    assert not failures, f"{counts}\n{report}"
    # the mutator explores both sides: some mutants still compile, most are refused
    assert counts["ok"] > FUZZ_MUTANTS // 50 and counts["zynml"] > FUZZ_MUTANTS // 2, counts


def test_fuzz_run_reports_what_is_not_a_zynml_error(monkeypatch):
    """The harness itself can fail: a Python exception and a hang are counted, not hidden."""
    import time

    def broken(source):
        if source == "boom":
            raise KeyError("boom")
        if source == "spin":                 # a compile that never ends, burning CPU
            end = time.process_time() + 30
            while time.process_time() < end:
                pass
        return None

    monkeypatch.setattr(zynbook, "compile", broken)
    started = time.monotonic()
    counts = fuzz.run(0, 0, limit_s=0.5, programs=["boom", "spin", "fine"])
    assert counts["other"] == 1 and counts["hang"] == 1 and counts["ok"] == 1
    assert len(counts["failures"]) == 2
    assert time.monotonic() - started < 20


def test_mutate_changes_programs():
    """The mutations do what they say (so the fuzz test explores what it claims to)."""
    src = "let x = 1\nlet y = x + 2\n"
    assert mutate(src, "delete_char", 0, 0, "") == "et x = 1\nlet y = x + 2\n"
    assert mutate(src, "duplicate_line", 1, 0, "") == "let x = 1\nlet y = x + 2\nlet y = x + 2\n"
    assert mutate(src, "swap_line", 0, 1, "") == "let y = x + 2\nlet x = 1\n"
    assert mutate(src, "delete_token", 2, 0, "") == "let x  1\nlet y = x + 2\n"
    assert mutate(src, "swap_token", 1, 3, "") == "let 1 = x\nlet y = x + 2\n"
    assert mutate(src, "replace_token", 3, 0, "{") == "let x = {\nlet y = x + 2\n"
    assert mutate(src, "insert_token", 0, 0, "var ") == "var let x = 1\nlet y = x + 2\n"
    assert mutate(src, "indent_line", 1, 3, "") == "let x = 1\n    let y = x + 2\n"
    assert mutate(src, "truncate", 12, 0, "") == "let x = 1\nle"


# compiling these needs more than the program: `model` from the host, two CUDA GPUs
NEEDS_HOST = {"transformer_block", "multi_gpu"}


def test_unmutated_examples_are_valid():
    """The starting points of the fuzzing are valid programs."""
    for path, source in zip(EXAMPLES, SOURCES):
        if path.stem in NEEDS_HOST:
            check_mutant(source)
        else:
            zynbook.compile(source)
