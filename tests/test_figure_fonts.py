"""tools/figure_fonts.py: the browser check's measure of static figures' text, read from executed notebooks."""

import base64
import io

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import nbformat  # noqa: E402
import pytest  # noqa: E402

import figure_fonts  # noqa: E402
from labhelpers import plotting  # noqa: E402

pytestmark = pytest.mark.backend_independent  # no kernel, no measurement: CI runs it (see conftest.py)


def _png(width_in: float, fontsize: float, *, record: bool = True) -> str:
    """A figure of ``width_in`` inches at 100 dpi whose smallest text is ``fontsize`` pt, as a notebook's base64 PNG."""
    fig, ax = plt.subplots(figsize=(width_in, 2), dpi=100)
    ax.set_axis_off()
    ax.text(0.5, 0.5, "label", fontsize=fontsize)
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", metadata=plotting.png_font_metadata(fig) if record else None)
    plt.close(fig)
    return base64.b64encode(buffer.getvalue()).decode()


def _notebook(tmp_path, *cells: tuple[str, list[str]]):
    nb = nbformat.v4.new_notebook()
    for cell_id, pngs in cells:
        cell = nbformat.v4.new_code_cell("plt.show()")
        cell.id = cell_id
        cell.outputs = [nbformat.v4.new_output("display_data", data={"image/png": png, "text/plain": "<Figure>"})
                        for png in pngs]
        nb.cells.append(cell)
    nb.cells.append(nbformat.v4.new_markdown_cell("no figure"))
    path = tmp_path / "tiny.ipynb"
    nbformat.write(nb, path)
    return path


def test_each_figure_is_measured_as_the_browser_check_does(tmp_path):
    path = _notebook(tmp_path, ("narrow", [_png(6, 8)]),
                     ("wide", [_png(6, 10), _png(13.6, 8)]),
                     ("bare", [_png(6, 6, record=False)]))
    found = {(f.cell, f.index): f for f in figure_fonts.figure_texts(path)}
    # 8 pt at 100 dpi in a 600 px image: shown at its own width, 8 * 100 / 72 px.
    assert found["narrow", 0].px == pytest.approx(800 / 72) and found["narrow", 0].readable
    # 1360 px wide: shrunk to the 680 px column, so the text is half as high.
    assert found["wide", 1].width == 1360 and found["wide", 1].px == pytest.approx(400 / 72)
    assert not found["wide", 1].readable
    # a PNG that records nothing is taken at matplotlib's default 10 pt, as the browser check does
    assert (found["bare", 0].pt, found["bare", 0].dpi) == (10, 100)


def test_exit_status_and_lines_name_the_cell(tmp_path, capsys):
    assert figure_fonts.main([str(_notebook(tmp_path, ("wide", [_png(6, 10), _png(13.6, 8)])))]) == 1
    out = capsys.readouterr().out
    assert "wide [1]: 5.6px (8 pt at 100 dpi, 1360px wide) < 9px" in out and "wide [0]" not in out
    assert figure_fonts.main([str(_notebook(tmp_path, ("fine", [_png(13.6, 16)]))), "--all"]) == 0
    assert "fine [0]: 11.1px" in capsys.readouterr().out
