"""Differential testing: random loop nests (tests/random_programs.py: elementwise nests,
inner reductions, contractions, whole-nest reduce kernels; random affine indices, dtypes,
odd sizes, inferred and host-given bounds) run on every device present and must equal the
CPU reference executor. Seeded; ZYNBOOK_DIFF_PROGRAMS and ZYNBOOK_DIFF_SEED pick others.

A device may refuse a program clearly (WebGPU refuses f64 with a device error); it may not
give another answer or raise anything else."""
from __future__ import annotations

import functools
import os
import random
import re
import sys
from pathlib import Path

import numpy as np
import pytest

import zynbook

sys.path.insert(0, str(Path(__file__).resolve().parent))
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from random_programs import oracle, random_program  # noqa: E402
from compute_testing import programs_equal_references, reference_results  # noqa: E402

N_PROGRAMS = int(os.environ.get("ZYNBOOK_DIFF_PROGRAMS", "300"))
SEED = int(os.environ.get("ZYNBOOK_DIFF_SEED", "16"))
_WANTED = os.environ.get("ZYNBOOK_TEST_DEVICES")
DEVICES = [d["id"] for d in zynbook.compute_devices()
           if d["id"] != "cpu" and (not _WANTED or d["id"] in _WANTED.split(","))]

TOLERANCE = {"f16": 2e-2, "f32": 1e-4, "mixed": 1e-4, "f64": 1e-9, "i32": 0.0}


@functools.lru_cache(maxsize=1)
def programs() -> list:
    rng = random.Random(SEED)
    return [random_program(rng) for _ in range(N_PROGRAMS)]


@functools.lru_cache(maxsize=1)
def references() -> list:
    return reference_results(programs())


def test_generator_covers_what_it_claims():
    kinds = {p.kind for p in programs()}
    dtypes = {p.dtype for p in programs()}
    features = set().union(*(p.features for p in programs()))
    assert kinds == {"elementwise", "reduction", "contraction", "reduce"}
    assert {"f32", "f64", "f16", "i32", "mixed"} <= dtypes
    assert {"offset index", "scaled index", "sum of loop variables", "reversed index",
            "host bounds", "inferred bounds", "contraction", "inner sum", "inner max",
            "reduce(+)", "reduce(max)", "min/max"} <= features
    sizes = {d for p in programs() for v in p.inputs.values() if isinstance(v, np.ndarray)
             for d in v.shape}
    assert {1, 7, 13, 127} & sizes and any(d % 2 for d in sizes)
    assert len(references()) == N_PROGRAMS


def _f32_values(source: str) -> bool:
    """Whether an "f64" program computes f32 values (as exact as f32, since a device's f32
    exp or tanh is not numpy's to the last bit): `float(i)`, or math on literals alone."""
    if "float(" in source:
        return True
    for m in re.finditer(r"\b(exp|tanh|sqrt)\(", source):
        depth, i = 1, m.end()
        while depth:
            depth += {"(": 1, ")": -1}.get(source[i], 0)
            i += 1
        if "[" not in source[m.end():i]:
            return True
    return False


def _compare(p, want, got) -> str | None:
    got = np.asarray(got)
    if got.shape != want.shape:
        return f"shape {got.shape}, reference {want.shape}"
    f64_only = not _f32_values(p.source) and any(
        getattr(v, "dtype", None) == np.float64 for v in p.inputs.values())
    tol = TOLERANCE["f32" if p.dtype == "f64" and not f64_only else p.dtype]
    w, g = want.astype(np.float64), got.astype(np.float64)
    if tol == 0.0:
        ok = np.array_equal(w, g)
    else:
        ok = np.allclose(g, w, rtol=tol, atol=tol, equal_nan=True)
    if ok:
        return None
    bad = np.argwhere(~np.isclose(g, w, rtol=tol, atol=tol, equal_nan=True)) if w.ndim else []
    at = tuple(bad[0]) if len(bad) else ()
    return f"differs at {at}: {g[at] if w.ndim else g} vs reference {w[at] if w.ndim else w}"


@pytest.mark.skipif(not DEVICES, reason="no device here but the reference")
@pytest.mark.parametrize("device", DEVICES)
def test_random_programs_equal_the_reference(device):
    programs_equal_references(device, programs(), references(), _compare,
                              lambda p, err: "f64" in err.message and p.dtype == "f64", 0.8)


@settings(max_examples=150, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 2**32 - 1))
def test_reference_equals_an_independent_evaluation(seed):
    """The reference executor itself against plain Python over the same loop nest (float64,
    or exact ints): hypothesis draws the programs (and shrinks a failing seed)."""
    p = random_program(random.Random(seed))
    if p.dtype == "f16":
        return          # f16 rounds at every step; the devices are compared with each other
    want = np.asarray(oracle(p), dtype=np.float64)
    got = np.asarray(zynbook.run(p.source, device="cpu", **p.inputs), dtype=np.float64)
    assert got.shape == want.shape, p
    if p.dtype == "i32":
        np.testing.assert_array_equal(got, want, err_msg=repr(p))
    else:
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4, err_msg=repr(p))
