"""The Python side of values a program hands back: pipelines, records, compiled programs."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import zynbook
from zynbook.compiler import cir

DOUBLE = """pipeline double(x: tensor[n]) -> tensor[n]:
    let y = compute(x) {
        @kernel elementwise
        for i in 0..n:
            out[i] = x[i] * 2.0
    }
    return y
double"""


def test_a_pipeline_is_callable_from_python_with_numpy_arrays():
    double = zynbook.run(DOUBLE)
    x = np.arange(7, dtype=np.float32)
    np.testing.assert_array_equal(np.asarray(double(x)), x * 2.0)


def test_a_pipeline_called_from_python_checks_shapes_against_its_source():
    double = zynbook.run(DOUBLE)
    with pytest.raises(zynbook.ZynMLShapeError) as info:
        double(np.zeros((2, 2), np.float32))
    assert info.value.line == 1
    assert "pipeline double(x: tensor[n])" in info.value.render()


def test_device_records_read_like_dicts():
    devices = zynbook.run("compute_devices()")
    assert devices[0]["id"] == devices[0].id == "cpu"
    assert "type" in devices[0]


def test_a_compiled_program_lists_its_cir_kernels_and_sources():
    examples = Path(__file__).resolve().parent.parent / "examples"
    program = zynbook.compile((examples / "matmul.zyn").read_text())
    assert [type(k) for k in program.cir] == [cir.Kernel]
    assert program.cir[0].kernel_type.kind == "matmul"
    assert "def " in program.sources("python")[0]


_DOUBLE = """let y = compute(x) {
    for i in 0..n:
        out[i] = x[i] * 2.0 + 1.0
}
y"""


@pytest.mark.parametrize("device", [d["id"] for d in zynbook.compute_devices()
                                    if not d["id"].startswith("browser")])
def test_a_bf16_torch_tensor_binds_as_f32_with_its_values(device):
    """numpy and CuPy have no bf16, so a torch bf16 tensor binds as the f32 tensor of its
    values (ZynML's own bf16 host tensors are held so); it used to be refused as a value
    'of type Tensor', though torch tensors are bindable."""
    torch = pytest.importorskip("torch")
    x = torch.randn(37, dtype=torch.bfloat16, requires_grad=True)
    want = x.detach().to(torch.float64).numpy() * 2.0 + 1.0
    got = zynbook.Session(device).run(_DOUBLE, x=x)
    assert got.dtype == "f32"
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-6)


@pytest.mark.parametrize("value, dtype", [(np.array([1j, 2.0]), "complex128"),
                                          (np.array(["a", "b"]), "<U1")])
def test_an_array_of_a_dtype_zynml_lacks_is_refused_naming_it(value, dtype):
    with pytest.raises(zynbook.ZynMLError) as info:
        zynbook.Session("cpu").run(_DOUBLE, x=value)
    err = info.value
    assert err.kind == "type" and (err.line, err.column) == (1, 17)
    assert f"dtype `{dtype}`" in err.message and "no type for" in err.message
