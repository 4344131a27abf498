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
def test_a_bf16_torch_tensor_binds_as_bf16_with_its_values(device):
    """A torch bf16 tensor binds as a bf16 tensor (its values held as f32: numpy and CuPy
    have no bf16), so a block computes with it as torch does and writes bf16; it used to
    bind as f32, and the block's result was not torch's."""
    torch = pytest.importorskip("torch")
    x = torch.randn(37, dtype=torch.bfloat16, requires_grad=True) / 3
    want = (x.detach() * 2.0 + 1.0).to(torch.float64).numpy()     # torch, in bf16
    assert not np.array_equal(want, x.detach().to(torch.float64).numpy() * 2.0 + 1.0)
    got = zynbook.Session(device).run(_DOUBLE, x=x)
    assert got.dtype == "bf16"
    np.testing.assert_array_equal(got.numpy().astype(np.float64), want)


@pytest.mark.parametrize("value, dtype", [(np.array([1j, 2.0]), "complex128"),
                                          (np.array(["a", "b"]), "<U1")])
def test_an_array_of_a_dtype_zynml_lacks_is_refused_naming_it(value, dtype):
    with pytest.raises(zynbook.ZynMLError) as info:
        zynbook.Session("cpu").run(_DOUBLE, x=value)
    err = info.value
    assert err.kind == "type" and (err.line, err.column) == (1, 17)
    assert f"dtype `{dtype}`" in err.message and "no type for" in err.message
