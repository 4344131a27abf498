"""notebooks/kernel_demo.ipynb runs top to bottom on the ZynML kernel (nbclient)."""
from __future__ import annotations

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")

from test_kernel_support import REPO, install_kernelspec  # noqa: E402

NOTEBOOK = REPO / "notebooks" / "kernel_demo.ipynb"
WIDGET_MIME = "application/vnd.jupyter.widget-view+json"


@pytest.fixture(scope="module")
def executed():
    install_kernelspec()
    nb = nbformat.read(NOTEBOOK, as_version=4)
    client = nbclient.NotebookClient(nb, timeout=120, kernel_name="zynml",
                                     resources={"metadata": {"path": str(REPO)}})
    client.execute()
    return nb


def _outputs(nb, needle):
    cell = next(c for c in nb.cells if c.cell_type == "code" and needle in c.source)
    return cell.outputs


def test_no_cell_fails(executed):
    for cell in executed.cells:
        if cell.cell_type == "code":
            assert not [o for o in cell.outputs if o.output_type == "error"], cell.source


def test_tensor_result_is_a_table(executed):
    (out,) = [o for o in _outputs(executed, "// GELU") if o.output_type == "execute_result"]
    assert "<table" in out.data["text/html"]
    assert "f32[3, 4]" in out.data["text/plain"]


def test_inspect_and_time_outputs(executed):
    (inspect,) = _outputs(executed, "%inspect")
    assert "stages: zynml" in inspect.data["text/plain"]
    assert "--- python: the kernel ---" in inspect.data["text/plain"]
    assert "zynml-map" in inspect.data["text/html"]
    text = "".join(o.get("text", "") for o in _outputs(executed, "%time\n"))
    assert "Wall time" in text


def test_python_cells_share_the_namespace(executed):
    text = "".join(o.get("text", "") for o in _outputs(executed, "ref = x * 0.5"))
    assert "max |ZynML - numpy|" in text
    (shifted,) = [o for o in _outputs(executed, "y[i, j] + offset")
                  if o.output_type == "execute_result"]
    assert "f32[3, 4]" in shifted.data["text/plain"]


def test_all_three_widgets_display(executed):
    for needle in ("DevicePicker()", "ShaderInspector()", "%python TimingWidget()",
                   "TimingWidget.compare"):
        outs = _outputs(executed, needle)
        assert any(WIDGET_MIME in o.get("data", {}) for o in outs), needle


def test_compute_magic_in_the_notebook(executed):
    text = "".join(o.get("text", "") for o in _outputs(executed, "isinstance(z, np.ndarray)"))
    assert "ndarray (3, 4)" in text
    (devices,) = [o for o in _outputs(executed, "%zynml_devices") if "data" in o]
    assert "cpu" in devices.data["text/plain"]


def test_nbconvert_html_highlights_zynml(executed):
    from pygments.lexers import get_lexer_by_name
    from pygments.util import ClassNotFound

    pytest.importorskip("nbconvert")
    try:
        get_lexer_by_name("zynml")
    except ClassNotFound:
        pytest.skip("zynbook is not installed (the pygments.lexers entry point comes with it)")
    from nbconvert.filters.highlight import Highlight2HTML

    # what nbconvert's HTML exporter does with the notebook's language_info
    lexer = executed.metadata.language_info.pygments_lexer
    assert lexer == "zynml"
    block = next(c.source for c in executed.cells if "@kernel" in c.source)
    html = Highlight2HTML(pygments_lexer=lexer)(block)
    assert '<span class="nd">@kernel</span>' in html
