"""What the backend tests and benches share besides kernel sources: lowering the one
compute block of a source with its inputs, and random inputs."""
from __future__ import annotations

import os

import numpy as np

from zynbook.compiler import ast as A
from zynbook.compiler import dims, lower
from zynbook.compiler.passes.pipeline import run_pipeline
from zynbook.compiler.parser import parse
from zynbook.compiler.types import DTYPE_ALIASES


def find_compute(node):
    """The first compute block in a parsed program (or any part of one), else None."""
    if isinstance(node, A.Compute):
        return node
    if isinstance(node, list):
        for n in node:
            r = find_compute(n)
            if r is not None:
                return r
        return None
    if hasattr(node, "__dataclass_fields__"):
        for f in node.__dataclass_fields__:
            r = find_compute(getattr(node, f))
            if r is not None:
                return r
    return None


def lower_signatures(src, signatures, scalar_types=None, name="kernel"):
    """The lowering of the one compute block in `src` whose inputs have these
    {name: (dtype, rank)}, scalars these {name: dtype}."""
    node = find_compute(parse(src).body)
    sigs = [lower.InputSig(lower.dotted(e), *signatures[lower.dotted(e)]) for e in node.inputs]
    return run_pipeline(lower.lower_compute(node, sigs, scalar_types or {}, name, src))


def lower_block(src, arrays, scalars=None, sizes=None, name="kernel"):
    """(kernel, inputs, sizes, scalars) of the one compute block in `src`."""
    scalars = scalars or {}
    types = {k: ("f32" if isinstance(v, float) else "i32") for k, v in scalars.items()}
    types.update({k: "i32" for k in (sizes or {})})
    lk = lower_signatures(src, {n: (DTYPE_ALIASES[str(a.dtype)], a.ndim) for n, a in arrays.items()},
                          types, name)
    k = lk.kernel
    shapes = {b.name: arrays[lk.labels[b.name]].shape for b in k.inputs}
    sz = dims.solve(lk, shapes, dict(sizes or {}))
    return k, [arrays[lk.labels[b.name]] for b in k.inputs], sz, \
        {s.name: scalars[s.name] for s in k.scalars}


def assert_equals_numpy(got, want, tol):
    """A run's result against numpy's: the same shape; integers equal, in the same dtype
    (but a scalar, which comes back as a Python number); floats within `tol`, NaN where
    numpy has NaN."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, (got.shape, want.shape)
    if want.dtype.kind in "biu":
        if got.ndim:      # a scalar comes back as a Python number
            assert got.dtype == want.dtype, (got.dtype, want.dtype)
        np.testing.assert_array_equal(got, want)
    else:
        np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64),
                                   rtol=tol, atol=tol, equal_nan=True)


def float32_normals(rng):
    """randn(*shape): f32 standard normal draws from the generator `rng`."""
    return lambda *shape: rng.standard_normal(shape).astype(np.float32)


def emulate_kernel(prog, kernel, ins, sizes, scalars=None, warp=32):
    """The output of launch-IR `prog` (built from `kernel`) run on the emulator with the
    inputs `ins` (in kernel.inputs order); a check that failed raises its ZynML error."""
    from zynbook.compiler import errflag
    from zynbook.backends import emulator as emulate
    from zynbook.compiler import cir
    shape = cir.output_shape(kernel, sizes)
    dtype = emulate.numpy_dtype(kernel.output.dtype)
    # a program that says it stores every element (no device zeroes its output) starts from
    # NaN, so an element it leaves shows in the comparison
    covers = prog.covers_output and np.issubdtype(dtype, np.floating)
    out = np.full(shape, np.nan, dtype) if covers else np.zeros(shape, dtype)
    buffers = {b.name: a for b, a in zip(kernel.inputs, ins)}
    buffers[kernel.output.name] = out
    words = emulate.run(prog, buffers, scalars or {}, sizes, warp=warp)
    err = errflag.error(prog.sites, words, kernel, sizes)
    if err is not None:
        raise err
    return out


def cuda_device():
    """The first CUDA device ZynBook finds, or None (no CuPy, no driver, no GPU)."""
    try:
        from zynbook.backends import cuda as backend
        found = backend.discover()
    except Exception:
        return None
    return found[0] if found else None


def wanted_devices() -> list:
    """The ids of the compute devices present: only those that ZYNBOOK_TEST_DEVICES names
    (comma-separated) where it is set, and `cpu`, the reference, always."""
    import zynbook
    wanted = os.environ.get("ZYNBOOK_TEST_DEVICES")
    return [d["id"] for d in zynbook.compute_devices()
            if not wanted or d["id"] in wanted.split(",") or d["id"] == "cpu"]


def raises(kind, src, line=None, column=None, device="cpu", **inputs):
    """The ZynMLError of kind `kind` that running `src` on a fresh session of `device` gives
    (at `line`, `column` where given, with a caret), the session still usable after it."""
    import pytest
    import zynbook
    from zynbook.errors import ZynMLError
    session = zynbook.Session(device)
    with pytest.raises(ZynMLError) as info:
        session.run(src, **inputs)
    err = info.value
    assert err.kind == kind, err
    if line is not None:
        assert (err.line, err.column) == (line, column), err
    assert "^" in err.render()
    assert session.run("1 + 1") == 2         # the session keeps working
    return err



def reference_results(progs) -> list:
    """The reference executor's answer for every generated program (each must be valid:
    an error is the generator's bug)."""
    import zynbook
    from zynbook.errors import ZynMLError
    out = []
    for p in progs:
        try:
            out.append(np.asarray(zynbook.run(p.source, device="cpu", **p.inputs)))
        except ZynMLError as err:
            raise AssertionError(f"{p!r}\n{err.render()}") from None
    return out

def programs_equal_references(device, progs, refs, compare, refusal_allowed, least_share):
    """Differential testing: run each generated program (`.source`, `.inputs`) on `device`
    and compare it with its reference result by `compare(p, want, got)` (a reason, or None
    where equal). A device error passes only where `refusal_allowed(p, err)`; at least
    `least_share` of the programs must be compared. `cpu:native`'s programs run in threads:
    their compiles are processes of their own."""
    import concurrent.futures as cf

    import zynbook
    from zynbook.errors import ZynMLDeviceError

    def run(p):
        try:
            return zynbook.run(p.source, device=device, **p.inputs)
        except ZynMLDeviceError as err:
            return err

    if device == "cpu:native":
        with cf.ThreadPoolExecutor(max_workers=max(2, os.cpu_count() or 2)) as pool:
            results = list(pool.map(run, progs))
    else:
        results = [run(p) for p in progs]
    compared, refused, failures = 0, 0, []
    for p, want, got in zip(progs, refs, results):
        if isinstance(got, ZynMLDeviceError):
            if refusal_allowed(p, got):
                refused += 1
            else:
                failures.append(f"{p!r}\n{got.render()}")
            continue
        compared += 1
        why = compare(p, want, got)
        if why:
            failures.append(f"{p!r}\n{why}")
    print(f"\n{device}: {compared} programs equal the reference, {refused} refused")
    assert not failures, f"{len(failures)} of {len(progs)} differ on {device}:\n\n" + \
        "\n\n".join(failures[:5])
    assert compared >= len(progs) * least_share
