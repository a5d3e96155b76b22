"""The built-book checker can fail: a page without MathJax, figures, its widgets or their state is reported."""

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

import check_built_book  # noqa: E402
import pytest

pytestmark = pytest.mark.backend_independent  # no kernel, no measurement: CI runs it (see conftest.py)


def test_missing_page_and_missing_math_are_reported(tmp_path):
    assert check_built_book.check_page(tmp_path, "book/01_cuda_in_python") == ["book/01_cuda_in_python: no HTML page"]
    page = tmp_path / "book" / "01_cuda_in_python.html"
    page.parent.mkdir()
    page.write_text('<html><body><span class="math">x</span> no math script, no images</body></html>')
    problems = check_built_book.check_page(tmp_path, "book/01_cuda_in_python")
    assert any("MathJax" in p for p in problems)
    assert any("figures" in p for p in problems)
    assert any("widget(s) saved but the page shows 0" in p for p in problems)  # neither a view nor frames
    page.write_text('<html><body><img src="a.png"><script type="application/vnd.jupyter.widget-view+json">'
                    '</script></body></html>')
    problems = check_built_book.check_page(tmp_path, "book/01_cuda_in_python")
    assert any("widget state" in p for p in problems)
    assert any("widget manager" in p for p in problems)
    page.write_text('<html><body><img src="a.png"><script src="../_static/widgets/embed-amd.js"></script>'
                    + '<div class="lh-widget"></div>' * 20 + '</body></html>')
    problems = check_built_book.check_page(tmp_path, "book/01_cuda_in_python")
    assert problems == ["book/01_cuda_in_python: loads the 4 MB widget manager but shows no widget view"]


def test_every_toc_page_is_listed():
    pages = check_built_book.toc_pages()
    assert pages[0] == "book/intro" and "book/06_reduction" in pages
