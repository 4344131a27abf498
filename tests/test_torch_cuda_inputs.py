"""torch CUDA tensors bound to ZynML names, as a notebook hands them over: every dtype torch
and ZynML share, non-contiguous and broadcast views, empty and odd sizes, through
`Session.run` and `%%compute`, on `cuda:0` (read in place) and on the other devices (copied
over), compared with numpy written here from the tensors' host copies.

Skipped without a CUDA GPU and torch; scripts/gpu_tests.sh runs them on a GPU machine."""
from __future__ import annotations

import numpy as np
import pytest

import zynbook

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA GPU for torch", allow_module_level=True)

pytestmark = pytest.mark.gpu
DEVICES = [d["id"] for d in zynbook.compute_devices() if not d["id"].startswith("browser")]

AFFINE = """let y = compute(x) {
    for i in 0..n:
        out[i] = x[i] * 2 + 1
}
y"""

ROWS = """let y = compute(a) {
    for i in 0..m, j in 0..k:
        out[i, j] = a[i, j] * 3.0 - float(j)
}
y"""

# torch dtype -> the numpy type of `x * 2 + 1` (a bool counts as i32; bf16 values are held
# as f32 and rounded to bf16, as torch computes them)
DTYPES = {"float32": np.float32, "float16": np.float16, "bfloat16": np.float32,
          "float64": np.float64, "int32": np.int32, "int64": np.int64, "int16": np.int16,
          "int8": np.int8, "uint8": np.uint8, "bool": np.int32}


def host(t) -> np.ndarray:
    t = t.detach().cpu()
    return (t.float() if t.dtype == torch.bfloat16 else t).numpy()


def values(result) -> np.ndarray:
    """A result's values on the host: a zynbook Tensor's, a CuPy array's or numpy's."""
    if isinstance(result, zynbook.Tensor):
        return result.numpy()
    return result.get() if type(result).__module__.startswith("cupy") else np.asarray(result)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", sorted(DTYPES))
def test_every_shared_dtype_binds_in_place_or_copied(device, dtype):
    g = torch.Generator(device="cuda").manual_seed(3)
    if dtype == "bool":
        x = torch.rand(1037, device="cuda", generator=g) > 0.5
    elif dtype.startswith(("int", "uint")):
        x = torch.randint(0, 50, (1037,), device="cuda", generator=g).to(getattr(torch, dtype))
    else:
        x = torch.randn(1037, device="cuda", generator=g).to(getattr(torch, dtype))
    want_type = DTYPES[dtype]
    session = zynbook.Session(device)
    if device.startswith(("vulkan", "gl", "metal", "dx12", "webgpu")) and \
            want_type in (np.float64, np.int64):
        # WGSL has no 64-bit integers, f64 only with the adapter's shader-f64: refused clearly
        try:
            got = values(session.run(AFFINE, x=x))
        except zynbook.ZynMLError as err:
            assert err.kind == "device" and ("64-bit" in err.message or "f64" in err.message), err
            return
    else:
        got = values(session.run(AFFINE, x=x))
    want = host(x).astype(want_type) * want_type(2) + want_type(1)
    if dtype == "bfloat16":
        want = host(x * 2 + 1)
    assert got.dtype == want.dtype
    rtol = {np.float16: 1e-3, np.float32: 1e-6, np.float64: 1e-12}.get(want_type, 0)
    np.testing.assert_allclose(got, want, rtol=rtol, atol=0)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("view", ["transposed", "strided", "broadcast", "sliced", "grad"])
def test_views_of_torch_tensors_read_as_their_values(device, view):
    base = torch.randn(37, 53, device="cuda", generator=torch.Generator(device="cuda").manual_seed(5))
    a = {"transposed": lambda: base.t(),
         "strided": lambda: base[::3, 1::2],
         "broadcast": lambda: base[4:5].expand(11, 53),
         "sliced": lambda: base[2:30, 7:41],
         "grad": lambda: base.clone().requires_grad_(True)}[view]()
    got = values(zynbook.Session(device).run(ROWS, a=a))
    want = host(a) * np.float32(3) - np.arange(a.shape[1], dtype=np.float32)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("n", [0, 1, 2 ** 20 + 3])
def test_empty_and_odd_sizes_on_cuda(n):
    x = torch.arange(n, device="cuda", dtype=torch.float32)
    got = values(zynbook.Session("cuda:0").run(AFFINE, x=x))
    np.testing.assert_array_equal(got, host(x) * 2 + 1)


def test_compute_magic_over_torch_cuda_tensors():
    """A notebook's torch CUDA tensors in a `%%compute` cell: its `let` names come back and
    the caller's tensor is untouched."""
    from IPython.core.interactiveshell import InteractiveShell
    shell = InteractiveShell.instance()
    shell.run_line_magic("load_ext", "zynbook")
    x = torch.randn(300, 7, device="cuda", dtype=torch.float16)
    before = x.clone()
    shell.user_ns["a"] = x
    result = shell.run_cell('%%compute @device("cuda:0")\n' + ROWS.replace("\ny", "\nlet z = y\nz"))
    assert result.error_in_exec is None, result.error_in_exec
    want = host(x) * np.float16(3) - np.arange(7, dtype=np.float16)
    np.testing.assert_allclose(values(shell.user_ns["z"]).astype(np.float32), want, rtol=2e-3, atol=2e-3)
    assert torch.equal(x, before)


PIPELINE = """pipeline affine(x: tensor[n]):
    return compute(x) {
        for i in 0..n:
            out[i] = x[i] * 2 + 1
    }"""


@pytest.mark.parametrize("how", ["cell", "pipeline", "cell twice"])
def test_a_call_inside_a_torch_stream_is_ordered_on_it(how):
    """Called inside `with torch.cuda.stream(s):`, a cell or a pipeline runs on `s`, after
    the caller's torch work there (torch's streams do not wait for CuPy's default stream: a
    kernel queued there would read `x` before `fill_`, while `s` still sleeps), and the
    caller's later work on `s` runs after it (the second `fill_` is not seen)."""
    session = zynbook.Session("cuda:0")
    session.run(PIPELINE)
    x = torch.zeros(4099, device="cuda")
    torch.cuda.synchronize()
    s = torch.cuda.Stream()
    for _ in range(2 if how == "cell twice" else 1):    # the second run: the warm path
        with torch.cuda.stream(s):
            torch.cuda._sleep(100_000_000)
            x.fill_(3.0)
            y = session.namespace["affine"](x) if how == "pipeline" else session.run(AFFINE, x=x)
            x.fill_(5.0)
        s.synchronize()
        np.testing.assert_array_equal(values(y), np.full(4099, 7.0, np.float32))
        x.zero_()
        torch.cuda.synchronize()
