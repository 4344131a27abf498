"""The launch-IR emulator and text form, on hand-built programs checked against numpy."""
import numpy as np
import pytest

from zynbook.compiler import errflag
from zynbook.backends import emulator as emulate
from zynbook.backends.emulator import EmulatorError, bf16_round
from zynbook.compiler.launch.ir import (Array, Atomic, Barrier, Bin, Cast, Checked, CheckedDiv,
                                        Collective, Decl, For, If, Kernel, Launch, Lit, Load,
                                        Math, Param, Program, Ref, Scratch, Select, Set, Store,
                                        Thread, ceildiv)
from zynbook.compiler.launch.text import format_program

I32 = "i32"
N = Ref("n", I32)


def i(v):
    return Lit(v, I32)


def f(v):
    return Lit(float(v), "f32")


def ref(name, dtype=I32):
    return Ref(name, dtype)


def add(a, b, dt=I32):
    return Bin("+", a, b, dt)


def mul(a, b, dt=I32):
    return Bin("*", a, b, dt)


def lt(a, b):
    return Bin("<", a, b, "bool")


def eq(a, b):
    return Bin("==", a, b, "bool")


GID = add(mul(Thread("block"), Thread("threads")), Thread("thread"))
STRIDE = mul(Thread("blocks"), Thread("threads"))
T = Thread("thread")


def grid_stride(body, line=1):
    """for i in gid .. n step blocks*threads: body"""
    return For("i", GID, N, STRIDE, tuple(body), line=line)


def elementwise(value, *, params, dtype="f32", block=256, grid=3, name="ew"):
    body = (grid_stride([Store("out", ref("i"), value, line=3)], line=2),)
    k = Kernel(name, tuple(params) + (Param("out", "buffer", dtype, True), Param("n", "size", I32)),
               body, block)
    grid = i(grid) if isinstance(grid, int) else grid
    return Program(name, (k,), (Launch(name, grid, block),))


def x_at(name="x", dt="f32", index=None):
    return Load(name, ref("i") if index is None else index, dt)


# ----------------------------------------------------------------------- elementwise


def test_grid_stride_elementwise_odd_sizes():
    n = 1000
    rng = np.random.default_rng(0)
    x = rng.standard_normal(n).astype(np.float32)
    y = rng.standard_normal(n).astype(np.float32)
    value = add(mul(x_at("x"), f(2.5), "f32"), Math("sigmoid", (x_at("y"),), "f32"), "f32")
    prog = elementwise(value, params=[Param("x", "buffer", "f32"), Param("y", "buffer", "f32")])
    out = np.full(n, -7, np.float32)
    assert emulate.run(prog, {"x": x, "y": y, "out": out}, {}, {"n": n}) == (0, 0)
    one = np.float32(1)
    want = x * np.float32(2.5) + one / (one + np.exp(-y))
    np.testing.assert_array_equal(out, want)


def test_elementwise_64x64_is_fast():
    import time
    n = 64 * 64
    x = np.arange(n, dtype=np.float32)
    prog = elementwise(mul(x_at(), x_at(), "f32"), params=[Param("x", "buffer", "f32")],
                       grid=ceildiv(N, 128), block=128)
    out = np.zeros(n, np.float32)
    t0 = time.perf_counter()
    emulate.run(prog, {"x": x, "out": out}, {}, {"n": n})
    assert time.perf_counter() - t0 < 1.0
    np.testing.assert_array_equal(out, x * x)


def test_integers_wrap_and_casts_truncate():
    n = 6
    x = np.array([2**31 - 1, -2**31, 7, -7, 100, 0], np.int32)
    y = np.array([1.9, -1.9, 3e10, float("nan"), -0.5, 255.5], np.float32)
    value = add(add(x_at("x", I32), i(1)), Cast(x_at("y"), I32))
    prog = elementwise(value, dtype=I32, grid=1, block=32,
                       params=[Param("x", "buffer", I32), Param("y", "buffer", "f32")])
    out = np.zeros(n, np.int32)
    emulate.run(prog, {"x": x, "y": y, "out": out}, {}, {"n": n})
    # x + 1 wraps; float -> int truncates toward zero and saturates, NaN gives 0
    cast = np.array([1, -1, 2**31 - 1, 0, 0, 255], np.int64)
    want = ((x.astype(np.int64) + 1 + cast + 2**31) % 2**32 - 2**31).astype(np.int32)
    np.testing.assert_array_equal(out, want)


# ------------------------------------------------------------------ reductions


def _partials_kernel(block):
    """Each block sums its grid-stride share of x into partials[block] through shared memory."""
    s_ref = ref("acc", "f32")
    body = [
        Decl("acc", "f32", f(0), mutable=True, line=1),
        grid_stride([Set("acc", add(s_ref, x_at(), "f32"), line=2)], line=2),
        Array("sh", "f32", block, "shared", line=1),
        Store("sh", T, s_ref, line=2),
        Barrier(line=2),
    ]
    s = block // 2
    while s:
        body += [If(lt(T, i(s)), (Store("sh", T, add(Load("sh", T, "f32"),
                                                         Load("sh", add(T, i(s)), "f32"), "f32")),),
                    line=2),
                 Barrier(line=2)]
        s //= 2
    body.append(Store("partials", Thread("block"), Load("sh", i(0), "f32"), guard=eq(T, i(0)),
                      line=2))
    return Kernel("partial", (Param("x", "buffer", "f32"), Param("partials", "scratch", "f32"),
                              Param("n", "size", I32)), tuple(body), block)


def _final_kernel(block, nparts):
    """One block: a block collective over the partials."""
    body = (
        Decl("acc", "f32", f(0), mutable=True, line=3),
        For("j", T, nparts, Thread("threads"),
            (Set("acc", add(ref("acc", "f32"), Load("partials", ref("j"), "f32"), "f32"), line=3),),
            line=3),
        Decl("total", "f32", Collective("+", ref("acc", "f32"), "block", "f32"), line=3),
        Store("out", i(0), ref("total", "f32"), guard=eq(T, i(0)), line=3),
    )
    return Kernel("final", (Param("partials", "scratch", "f32"),
                            Param("out", "buffer", "f32", True), Param("n", "size", I32)),
                  body, block)


def reduction_program(block=64):
    nblocks = ceildiv(N, block)
    nparts = Bin("/", add(N, i(block - 1)), i(block), I32)     # the same count, on the device
    return Program("sum", (_partials_kernel(block), _final_kernel(block, nparts)),
                   (Launch("partial", nblocks, block), Launch("final", i(1), block)),
                   scratch=(Scratch("partials", "f32", nblocks),), schedule="tree block=64",
                   lines={1: "s = 0.0", 2: "s += x[i]", 3: "out[0] = s"})


@pytest.mark.parametrize("n,warp", [(1000, 32), (1000, 4), (37, 32)])
def test_block_reduction_with_scratch_partials(n, warp):
    x = np.random.default_rng(1).standard_normal(n).astype(np.float32)
    out = np.zeros(1, np.float32)
    assert emulate.run(reduction_program(), {"x": x, "out": out}, {}, {"n": n}, warp=warp) == (0, 0)
    np.testing.assert_allclose(out[0], x.astype(np.float64).sum(), rtol=1e-5, atol=1e-5)


def test_missing_barrier_is_a_race():
    prog = reduction_program()
    k = prog.kernels[0]
    body = tuple(s for j, s in enumerate(k.body) if not (isinstance(s, Barrier) and j == 6))
    prog = Program("sum", (Kernel(k.name, k.params, body, k.block), prog.kernels[1]), prog.launches,
                   prog.scratch)
    x = np.ones(1000, np.float32)
    with pytest.raises(EmulatorError, match="data race on shared `sh`"):
        emulate.run(prog, {"x": x, "out": np.zeros(1, np.float32)}, {}, {"n": 1000})


@pytest.mark.parametrize("warp", [32, 4])
def test_warp_collective_row_sum(warp):
    rows, cols, block = 7, 45, 64
    per_block = block // warp                   # one row per warp
    row = add(mul(Thread("block"), i(per_block)), Thread("warp"))
    body = (
        Decl("row", I32, row, line=1),
        Decl("acc", "f32", f(0), mutable=True, line=1),
        If(lt(ref("row"), i(rows)), (
            For("j", Thread("lane"), i(cols), i(warp), (
                Set("acc", add(ref("acc", "f32"),
                               Load("x", add(mul(ref("row"), i(cols)), ref("j")), "f32"), "f32"),
                    line=2),), line=2),), line=2),
        Decl("total", "f32", Collective("+", ref("acc", "f32"), "warp", "f32"), line=2),
        Store("out", ref("row"), ref("total", "f32"),
              guard=Bin("and", eq(Thread("lane"), i(0)), lt(ref("row"), i(rows)), "bool"), line=3),
    )
    k = Kernel("rowsum", (Param("x", "buffer", "f32"), Param("out", "buffer", "f32", True)), body,
               block)
    prog = Program("rowsum", (k,), (Launch("rowsum", i(-(-rows // per_block)), block),))
    x = np.random.default_rng(2).standard_normal((rows, cols)).astype(np.float32)
    out = np.zeros(rows, np.float32)
    assert emulate.run(prog, {"x": x, "out": out}, {}, {}, warp=warp) == (0, 0)
    np.testing.assert_allclose(out, x.astype(np.float64).sum(axis=1), rtol=1e-5, atol=1e-5)


# ------------------------------------------------------------------- runtime errors


def gather_program():
    sites = (errflag.Site(errflag.INDEX, 4, "x", "m"),)
    value = Load("x", Checked(Load("idx", ref("i"), I32), ref("m"), 1, I32), "f32")
    prog = elementwise(value, params=[Param("x", "buffer", "f32"), Param("idx", "buffer", I32),
                                      Param("m", "size", I32)], block=32, grid=2, name="gather")
    prog.sites = sites
    prog.lines = {4: "out[i] = x[idx[i]]"}
    return prog


def test_out_of_range_gather_reports_site_and_index():
    m, n = 10, 100
    x = np.arange(m, dtype=np.float32) * 10
    idx = np.arange(n, dtype=np.int32) % m
    out = np.zeros(n, np.float32)
    prog = gather_program()
    sizes = {"n": n, "m": m}
    assert emulate.run(prog, {"x": x, "idx": idx, "out": out}, {}, sizes) == (0, 0)
    np.testing.assert_array_equal(out, x[idx])

    idx[7], idx[50] = 1005, -3                  # the first failure in thread order wins
    words = emulate.run(prog, {"x": x, "idx": idx, "out": out}, {}, sizes)
    assert words == (1, 1005)
    err = errflag.error(prog.sites, words, sizes=sizes)
    assert err.message == "index 1005 is out of range for an axis of size 10 of `x`"
    assert err.span.line == 4


def test_division_by_zero_and_overflow():
    n = 5
    sites = (errflag.Site(errflag.DIV_ZERO, 2), errflag.Site(errflag.DIV_OVERFLOW, 2))
    value = CheckedDiv("/", x_at("a", I32), x_at("b", I32), 1, 2, I32)
    prog = elementwise(value, dtype=I32, grid=1, block=32,
                       params=[Param("a", "buffer", I32), Param("b", "buffer", I32)])
    prog.sites = sites
    a = np.array([7, -7, 7, -2**31, 9], np.int32)
    b = np.array([2, 2, -2, 3, 1], np.int32)
    out = np.zeros(n, np.int32)
    assert emulate.run(prog, {"a": a, "b": b, "out": out}, {}, {"n": n}) == (0, 0)
    np.testing.assert_array_equal(out, np.trunc(a / b).astype(np.int32))     # C truncation

    b[3] = -1
    words = emulate.run(prog, {"a": a, "b": b, "out": out}, {}, {"n": n})
    assert words == (2, -2**31)
    assert "does not fit" in errflag.error(sites, words).message

    b[1] = 0
    words = emulate.run(prog, {"a": a, "b": b, "out": out}, {}, {"n": n})
    assert words == (1, -7)
    assert errflag.error(sites, words).message == "integer division by zero"


def test_nan_propagates_through_max_and_min():
    nan = np.float32("nan")
    x = np.array([1, nan, 3, nan, -2, 0], np.float32)
    y = np.array([2, 5, nan, nan, -3, -0.5], np.float32)
    for fn, ref_fn in (("max", np.maximum), ("min", np.minimum)):
        prog = elementwise(Math(fn, (x_at("x"), x_at("y")), "f32"), grid=1, block=4,
                           params=[Param("x", "buffer", "f32"), Param("y", "buffer", "f32")])
        out = np.zeros(6, np.float32)
        emulate.run(prog, {"x": x, "y": y, "out": out}, {}, {"n": 6})
        np.testing.assert_array_equal(out, ref_fn(x, y))
    prog = elementwise(Math("relu", (x_at("x"),), "f32"), grid=1, block=4,
                       params=[Param("x", "buffer", "f32")])
    out = np.zeros(6, np.float32)
    emulate.run(prog, {"x": x, "out": out}, {}, {"n": 6})
    np.testing.assert_array_equal(out, np.maximum(x, 0))


def _bf16_numpy(a):
    u = np.asarray(a, np.float32).view(np.uint32).astype(np.uint64)
    u = (u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000
    return u.astype(np.uint32).view(np.float32)


def test_bf16_rounds_to_nearest_even_on_store():
    # 1 + 2^-8 is halfway between two bf16 numbers (rounds to even: 1); 1 + 3*2^-8 rounds up
    a = np.array([1.0, 1.0, 1.0, 3.14159, -2.71828, 1e30, 0.0], np.float32)
    b = np.array([2**-8, 3 * 2**-8, 2**-9, 0.001, -0.0001, 1e29, 2**-130], np.float32)
    # the sum is made in bf16's float32 registers and rounded once, by the store
    value = add(Cast(x_at("a"), "bf16"), Cast(x_at("b"), "bf16"), "bf16")
    prog = elementwise(value, dtype="bf16", grid=1, block=8,
                       params=[Param("a", "buffer", "f32"), Param("b", "buffer", "f32")])
    out = np.zeros(7, np.float32)
    emulate.run(prog, {"a": a, "b": b, "out": out}, {}, {"n": 7})
    want = _bf16_numpy(_bf16_numpy(a) + _bf16_numpy(b))
    np.testing.assert_array_equal(out, want)
    assert out[0] == 1.0 and out[1] == np.float32(1 + 2**-6)
    assert np.isnan(bf16_round(np.float32("nan")))
    assert bf16_round(np.float32("inf")) == np.inf


# ------------------------------------------------------------------ schedule bugs


def _one_kernel(body, block=32, params=()):
    k = Kernel("k", tuple(params) + (Param("out", "buffer", "f32", True),), tuple(body), block)
    return Program("p", (k,), (Launch("k", i(1), block),))


def test_divergent_barrier_is_rejected():
    prog = _one_kernel([If(lt(T, i(16)), (Barrier(line=5),), line=5),
                        Store("out", T, f(1), line=6)])
    with pytest.raises(EmulatorError, match=r"diverge.*threads 0-15 at a barrier at line 5"
                                            r".*threads 16-31 finished"):
        emulate.run(prog, {"out": np.zeros(32, np.float32)}, {}, {})


def test_warp_collective_in_part_of_a_warp_is_rejected():
    total = Collective("+", f(1), "warp", "f32")
    prog = _one_kernel([If(lt(Thread("lane"), i(2)), (Store("out", T, total, line=3),), line=3)],
                       block=8)
    with pytest.raises(EmulatorError, match="warp 0 of block 0"):
        emulate.run(prog, {"out": np.zeros(8, np.float32)}, {}, {}, warp=4)
    prog = _one_kernel([If(lt(Thread("warp"), i(1)), (Store("out", T, total, line=3),), line=3)],
                       block=8)
    out = np.zeros(8, np.float32)                # a whole warp may take the branch alone
    emulate.run(prog, {"out": out}, {}, {}, warp=4)
    np.testing.assert_array_equal(out, [4, 4, 4, 4, 0, 0, 0, 0])


def test_unguarded_out_of_range_load_is_rejected():
    value = x_at(index=add(ref("i"), i(1)))
    prog = elementwise(value, params=[Param("x", "buffer", "f32")], grid=1, block=32)
    with pytest.raises(EmulatorError, match=r"a load of `x`\[10\] outside its 10 elements"):
        emulate.run(prog, {"x": np.zeros(10, np.float32), "out": np.zeros(10, np.float32)}, {},
                    {"n": 10})
    # numpy's negative indices are never read either
    prog = elementwise(x_at(index=Bin("-", ref("i"), i(1), I32)), grid=1, block=32,
                       params=[Param("x", "buffer", "f32")])
    with pytest.raises(EmulatorError, match=r"`x`\[-1\]"):
        emulate.run(prog, {"x": np.zeros(10, np.float32), "out": np.zeros(10, np.float32)}, {},
                    {"n": 10})


def test_ill_typed_nodes_are_rejected():
    prog = elementwise(add(x_at(), i(1), "f32"), params=[Param("x", "buffer", "f32")])
    with pytest.raises(EmulatorError, match="f32 \\+ i32"):
        emulate.run(prog, {"x": np.zeros(4, np.float32), "out": np.zeros(4, np.float32)}, {},
                    {"n": 4})


# ------------------------------------------------------------------- other statements


def test_local_arrays_atomics_select_and_guards():
    # each thread fills a local array, sums it; an atomic accumulates a histogram of parity
    body = [
        Array("loc", "f32", 4, "local", line=1),
        For("k", i(0), i(4), i(1), (Store("loc", ref("k"), Cast(add(T, ref("k")), "f32")),),
            line=1),
        Decl("s", "f32", f(0), mutable=True, line=2),
        For("k", i(0), i(4), i(1), (Set("s", add(ref("s", "f32"), Load("loc", ref("k"), "f32"),
                                                 "f32")),), line=2),
        Store("out", T, Select(lt(T, i(5)), ref("s", "f32"), f(-1), "f32"), line=3),
        Atomic("+", "hist", Bin("%", T, i(2), I32), f(1), guard=lt(T, i(9)), line=4),
    ]
    prog = _one_kernel(body, block=16, params=[Param("hist", "buffer", "f32", True)])
    out, hist = np.zeros(16, np.float32), np.zeros(2, np.float32)
    assert emulate.run(prog, {"out": out, "hist": hist}, {}, {}) == (0, 0)
    t = np.arange(16)
    np.testing.assert_array_equal(out, np.where(t < 5, 4 * t + 6, -1))
    np.testing.assert_array_equal(hist, [5, 4])


# ------------------------------------------------------------------------ text


def test_format_program():
    prog = reduction_program()
    prog.sites = (errflag.Site(errflag.INDEX, 2, "x", "n"),)
    text = format_program(prog)
    assert text == format_program(prog)                                    # deterministic
    assert "launch partial<<<ceildiv(n, 64), 64>>>" in text
    assert "launch final<<<1, 64>>>" in text
    assert "scratch partials: f32[ceildiv(n, 64)]" in text
    assert "#1 index `x` extent n  line 2" in text
    assert "kernel partial  block 64" in text
    assert "shared sh: f32[64]" in text
    assert "256 bytes shared" in text
    assert "barrier" in text
    assert "# line 2: s += x[i]" in text
    assert text.count("# line 2: s += x[i]") < text.count("# line 2")      # once per run of lines
    assert "block_reduce(+, acc):f32" in text
    assert "for i: i32 in (@block * @threads) + @thread .. n step @blocks * @threads:" in text
    gather = format_program(gather_program())
    assert "x[checked(idx[i] in 0..m, #1)]" in gather


# ------------------------------------------------------------------------ more


def test_f16_arithmetic_rounds_every_operation():
    rng = np.random.default_rng(3)
    x = rng.standard_normal(50).astype(np.float16)
    y = rng.standard_normal(50).astype(np.float16)
    h = "f16"
    value = add(mul(x_at("x", h), x_at("y", h), h), Math("exp", (x_at("x", h),), h), h)
    prog = elementwise(value, dtype=h, grid=2, block=16,
                       params=[Param("x", "buffer", h), Param("y", "buffer", h)])
    out = np.zeros(50, np.float16)
    emulate.run(prog, {"x": x, "y": y, "out": out}, {}, {"n": 50})
    np.testing.assert_array_equal(out, x * y + np.exp(x))


def test_deep_expressions_are_emulated():
    e = x_at()
    for k in range(250):                        # deeper than Python's parser nests
        e = add(e, f(k % 3), "f32")
    prog = elementwise(e, params=[Param("x", "buffer", "f32")], grid=1, block=8)
    x = np.arange(10, dtype=np.float32)
    out = np.zeros(10, np.float32)
    emulate.run(prog, {"x": x, "out": out}, {}, {"n": 10})
    np.testing.assert_array_equal(out, x + sum(k % 3 for k in range(250)))


@pytest.mark.parametrize("warp", [32, 4])
def test_block_collective_over_a_partial_warp(warp):
    block = 40                                  # not a multiple of 32: the last warp is partial
    x = np.random.default_rng(4).standard_normal(block).astype(np.float32)
    for op, want in (("max", x.max()), ("min", x.min())):
        body = [Store("out", T, Collective(op, Load("x", T, "f32"), "block", "f32"), line=1)]
        prog = _one_kernel(body, block=block, params=[Param("x", "buffer", "f32")])
        out = np.zeros(block, np.float32)
        emulate.run(prog, {"x": x, "out": out}, {}, {}, warp=warp)
        np.testing.assert_array_equal(out, np.full(block, want))
    x[17] = np.nan                              # max propagates NaN, as everywhere
    body = [Store("out", T, Collective("max", Load("x", T, "f32"), "block", "f32"), line=1)]
    out = np.zeros(block, np.float32)
    emulate.run(_one_kernel(body, block=block, params=[Param("x", "buffer", "f32")]),
                {"x": x, "out": out}, {}, {}, warp=warp)
    assert np.isnan(out).all()


def test_uninitialised_shared_memory_reads_nan():
    # thread t reads sh[t + 1] after a barrier; nobody wrote sh[block]: the device has garbage
    body = [Array("sh", "f32", 9, "shared", line=1), Store("sh", T, f(1), line=1),
            Barrier(line=1), Store("out", T, Load("sh", add(T, i(1)), "f32"), line=2)]
    out = np.zeros(8, np.float32)
    emulate.run(_one_kernel(body, block=8), {"out": out}, {}, {})
    assert np.isnan(out[7]) and (out[:7] == 1).all()
    out = np.zeros(8, np.float32)
    emulate.run(_one_kernel(body, block=8), {"out": out}, {}, {}, poison=False)
    assert out[7] == 0


def test_checks_name_sites_the_program_has():
    prog = gather_program()
    prog.sites = ()
    with pytest.raises(EmulatorError, match="error site 1; the program has 0 sites"):
        emulate.run(prog, {"x": np.zeros(3, np.float32), "idx": np.zeros(3, np.int32),
                           "out": np.zeros(3, np.float32)}, {}, {"n": 3, "m": 3})


def test_checked_remainder_and_global_race():
    sites = (errflag.Site(errflag.REM_ZERO, 1),)
    value = CheckedDiv("%", x_at("a", I32), x_at("b", I32), 1, 0, I32)
    prog = elementwise(value, dtype=I32, grid=1, block=8,
                       params=[Param("a", "buffer", I32), Param("b", "buffer", I32)])
    prog.sites = sites
    a = np.array([7, -7, 7, -2**31], np.int32)
    b = np.array([3, 3, -3, -1], np.int32)
    out = np.zeros(4, np.int32)
    assert emulate.run(prog, {"a": a, "b": b, "out": out}, {}, {"n": 4}) == (0, 0)
    np.testing.assert_array_equal(out, [1, -1, 1, 0])           # C's sign of the dividend
    # two blocks writing different values to one element of the output race
    prog = elementwise(x_at(), params=[Param("x", "buffer", "f32")], grid=2, block=4)
    k = prog.kernels[0]
    body = (Store("out", i(0), Cast(Thread("block"), "f32"), guard=eq(T, i(0)), line=1),)
    prog = Program("p", (Kernel(k.name, k.params, body, 4),), prog.launches)
    with pytest.raises(EmulatorError, match=r"data race on `out`\[0\]"):
        emulate.run(prog, {"x": np.zeros(1, np.float32), "out": np.zeros(1, np.float32)}, {},
                    {"n": 1})


# ------------------------------------------------------- a schedule's own program


def test_generic_schedule_program_end_to_end():
    from compute_testing import lower_block

    from zynbook.compiler import schedules
    from zynbook.compiler.targets import cuda_target
    src = """
let y = compute(m, v, dc, dr, pos) {
    @kernel elementwise
    for i in 0..rows, j in 0..cols:
        out[i, j] = m[i, j] * v[pos[j]] + f32(dc[j] / dr[i])
}
y
"""
    rng = np.random.default_rng(5)
    m = rng.standard_normal((5, 7)).astype(np.float32)
    v = rng.standard_normal(7).astype(np.float32)
    dc = np.array([3, -7, 2, 5, 9, 4, 1], np.int32)
    dr = np.array([2, -3, 1, 4, 5], np.int32)
    pos = np.arange(7, dtype=np.int32)[::-1].copy()
    kernel, _, sizes, scalars = lower_block(src, {"m": m, "v": v, "dc": dc, "dr": dr, "pos": pos})
    prog = schedules.build(kernel, cuda_target(), sizes)
    out = np.zeros((5, 7), np.float32)
    buffers = {"m": m, "v": v, "dc": dc, "dr": dr, "pos": pos, "out": out}   # ZynML names
    assert emulate.run(prog, buffers, scalars, sizes) == (0, 0)
    want = m * v[pos] + np.trunc(dc[None, :] / dr[:, None]).astype(np.float32)
    np.testing.assert_array_equal(out, want)

    pos[3], dr[2] = 9, 0                        # (i=0, j=3) runs before (i=2, j=*)
    words = emulate.run(prog, buffers, scalars, sizes)
    err = errflag.error(prog.sites, words, kernel, sizes)
    assert err.message == "index 9 is out of range for an axis of size 7 of `v`"
    assert err.span.line == 5
    pos[3] = 1
    err = errflag.error(prog.sites, emulate.run(prog, buffers, scalars, sizes), kernel, sizes)
    assert err.message == "integer division by zero"
    text = format_program(prog)
    assert "launch zyn_k_kernel<<<1:i64, 256>>>" in text
    assert "checked(u_dc[u_j] / u_dr[u_i], #2, #3)" in text


def test_in_range_guard_skips_the_store_and_reports():
    from zynbook.compiler.launch.ir import InRange
    sites = (errflag.Site(errflag.INDEX, 7, "out", "n"),)
    dest = Load("dest", ref("i"), I32)
    body = (grid_stride([Store("out", dest, x_at(), guard=InRange(dest, N, 1), line=7),
                         Atomic("+", "count", Checked(dest, N, 1, I32), i(1), line=8)]),)
    k = Kernel("scatter", (Param("x", "buffer", "f32"), Param("dest", "buffer", I32),
                           Param("out", "buffer", "f32", True), Param("count", "buffer", I32, True),
                           Param("n", "size", I32)), body, 4)
    prog = Program("scatter", (k,), (Launch("scatter", ceildiv(N, 4), 4),), sites=sites)
    x = np.arange(6, dtype=np.float32) + 1
    dest = np.array([5, 4, 3, 2, 1, 0], np.int32)
    out, count = np.zeros(6, np.float32), np.zeros(6, np.int32)
    bufs = {"x": x, "dest": dest, "out": out, "count": count}
    assert emulate.run(prog, bufs, {}, {"n": 6}) == (0, 0)
    np.testing.assert_array_equal(out, x[::-1])
    np.testing.assert_array_equal(count, np.ones(6))
    dest[2] = 6
    out[:], count[:] = 0, 0
    assert emulate.run(prog, bufs, {}, {"n": 6}) == (1, 6)
    assert out[3] == 0 and count[3] == 0 and count.sum() == 5       # neither was made
    assert "in_range(dest[i] in 0..n, #1)" in format_program(prog)


def _spec_cases():
    import kernel_sources as ks
    rng = np.random.default_rng(6)
    x16 = rng.standard_normal(333).astype(np.float16)
    y16 = rng.standard_normal(333).astype(np.float16)
    m = rng.standard_normal((13, 29)).astype(np.float32)
    v = rng.standard_normal(29).astype(np.float32)
    x = rng.standard_normal(1000).astype(np.float32)
    return [
        ("relu", ks.SPEC_RELU, {"x": x}, np.maximum(x, 0)),
        ("mul_add_f16", ks.SPEC_MUL_ADD, {"x": x16, "y": y16},      # each f16 step rounded
         x16 * y16 + np.float16(1)),
        ("broadcast", ks.SPEC_BROADCAST, {"matrix": m, "vector": v}, m * v[None, :]),
    ]


@pytest.mark.parametrize("target", ["cuda", "webgpu", "cpu"])
def test_generic_schedule_spec_kernels(target):
    from compute_testing import lower_block

    from zynbook.compiler import schedules
    from zynbook.compiler.targets import cpu_target, cuda_target, webgpu_target
    tgt, warp = {"cuda": (cuda_target(), 32), "webgpu": (webgpu_target(subgroup=4), 4),
                 "cpu": (cpu_target(), 1)}[target]
    for name, src, arrays, want in _spec_cases():
        kernel, _, sizes, scalars = lower_block(src, arrays)
        prog = schedules.build(kernel, tgt, sizes)
        out = np.zeros(want.shape, emulate.numpy_dtype(kernel.output.dtype))
        words = emulate.run(prog, {**arrays, kernel.output.name: out}, scalars, sizes, warp=warp)
        assert words == (0, 0), name
        np.testing.assert_array_equal(out, want, err_msg=name)


@pytest.mark.parametrize("cc", [(9, 0), (8, 0)])
def test_index_error_gives_an_axis_size_computed_from_sizes(cc):
    """An axis whose size is an expression of sizes (`k + len`) is reported with its value
    at the launch, as the reference reports it (the compiled devices said `size k + len`)."""
    from compute_testing import lower_block

    from zynbook.compiler import schedules
    from zynbook.compiler.targets import cuda_target
    src = """
let y = compute(x) {
    @kernel elementwise
    for i in 0..len:
        out[i + k] = x[i]
}
y
"""
    kernel, _, sizes, scalars = lower_block(src, {"x": np.arange(12, dtype=np.float32)},
                                            {}, {"k": -5})
    prog = schedules.build(kernel, cuda_target(cc), sizes)
    out = np.zeros(7, np.float32)
    words = emulate.run(prog, {"x": np.arange(12, dtype=np.float32), "out": out}, scalars, sizes)
    err = errflag.error(prog.sites, words, kernel, sizes)
    assert err.message == "index -5 is out of range for an axis of size 7 of `out`"
    assert "`out` extent k + len" in format_program(prog)


# ------------------------------------ the spec's kernel programs through the schedules


class _ScheduledDevice:
    """A device that runs each kernel as the launch IR the schedules build for `target` (a
    CUDA or Metal target: sizes baked in) on this emulator, and checks it against the
    reference executor."""

    kind, backend = "gpu", "emulated"

    def __init__(self, target, gemm_first):
        self.id, self.name = f"emulated-{target.name}-{target.arch}", "launch-IR emulator"
        self.target, self.gemm_first = target, gemm_first
        self.launches, self.mismatches = [], []

    def launch(self, kernel, inputs, sizes, scalars, params=None):
        from zynbook.backends.base import Launch, LaunchTimes
        from zynbook.backends.cpu.reference import run_kernel
        from zynbook.compiler import cir, schedules
        from zynbook.compiler.codegen import cstyle
        sizes = {k: int(v) for k, v in sizes.items()}
        prog = cstyle.rendered(kernel, sizes, self.target.lang, lambda sz: cstyle.scheduled(
            kernel, self.target, sz, {}, lambda notes, **how: schedules.build(
                kernel, self.target, sz, how.get("params"), only=how.get("only"),
                exclude=how.get("exclude", ())), gemm_first=self.gemm_first))
        arrays = [np.asarray(a) for a in inputs]
        out = np.zeros(cir.output_shape(kernel, sizes), emulate.numpy_dtype(kernel.output.dtype))
        buffers = {b.name: a for b, a in zip(kernel.inputs, arrays)}
        buffers[kernel.output.name] = out
        errflag.raise_if_failed(prog.sites, emulate.run(prog, buffers, scalars, sizes,
                                                        warp=self.target.warp), kernel, sizes)
        want = np.asarray(run_kernel(kernel, arrays, sizes, scalars), np.float64)
        if not np.allclose(out.astype(np.float64), want, rtol=2e-4, atol=2e-5, equal_nan=True):
            self.mismatches.append(kernel.name)
        self.launches.append(prog.schedule)
        return out, Launch(kernel.name, self.id, LaunchTimes(kernel=0.0, source="host-clock"),
                           {"schedule": prog.schedule})

    def prepare(self, kernel, sizes):
        from zynbook.backends.base import LaunchPlan
        return LaunchPlan(self, kernel, sizes)

    def info(self):
        return {"id": self.id, "type": self.kind, "name": self.name, "backend": self.backend}

    def to_host(self, array):
        return np.asarray(array)

    def from_host(self, array):
        return np.asarray(array)

    def synchronize(self):
        pass


def _spec_program_cases():
    from test_spec_programs_kernels import CASES
    # a body one thread runs alone, 8000 stores each followed by a barrier among 1024
    # threads: a quarter of a minute here, nothing the others lack
    slow = {"out_written_twice_by_a_loop"}
    return {name: case for name, case in CASES.items() if name not in slow}


@pytest.mark.parametrize("target", ["sm_90", "sm_80", "metal"])
@pytest.mark.parametrize("name", sorted(_spec_program_cases()))
def test_spec_kernel_programs_on_scheduled_targets(monkeypatch, name, target):
    """tests/test_spec_programs_kernels.py's programs, each kernel as the launch IR of a CUDA
    (sm_90, sm_80) or Metal target run here: numpy's answers, and the reference's per launch."""
    import zynbook
    from zynbook.backends import registry
    from zynbook.compiler.targets import cuda_target, metal_target
    tgt = {"sm_90": cuda_target((9, 0)), "sm_80": cuda_target((8, 0)),
           "metal": metal_target()}[target]
    dev = _ScheduledDevice(tgt, gemm_first=target != "metal")
    monkeypatch.setitem(registry._discover(), dev.id, dev)
    src, inputs, want, tol = _spec_program_cases()[name]
    got = np.asarray(zynbook.Session(device=dev.id).run(src, **inputs))
    want = np.asarray(want)
    assert dev.launches and not dev.mismatches, dev.mismatches
    assert got.shape == want.shape, (got.shape, want.shape)
    np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=tol,
                               atol=tol, equal_nan=True)


@pytest.mark.parametrize("cc", [(9, 0), (8, 0)])
def test_a_size_past_i32_keeps_its_value(cc):
    """A host integer of 3e9 given as a size reaches the kernel whole, as the CUDA and MSL
    printers compile it in (a 64-bit literal); the emulator wrapped it to the i32 parameter
    and gave -1294967296."""
    from compute_testing import lower_block

    from zynbook.compiler import schedules
    from zynbook.compiler.targets import cuda_target
    src = """
let y = compute(x) {
    @kernel elementwise
    for i in 0..len:
        out[i] = x[i] + k
}
y
"""
    x = np.arange(5, dtype=np.int64)
    kernel, _, sizes, scalars = lower_block(src, {"x": x}, {}, {"k": 3_000_000_000})
    prog = schedules.build(kernel, cuda_target(cc), sizes)
    out = np.zeros(5, np.int64)
    assert emulate.run(prog, {"x": x, "out": out}, scalars, sizes) == (0, 0)
    np.testing.assert_array_equal(out, x + 3_000_000_000)
