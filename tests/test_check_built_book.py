"""The built-book checker can fail: a page without MathJax, figures or widget state is reported."""

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

import check_built_book  # noqa: E402


def test_missing_page_and_missing_math_are_reported(tmp_path):
    assert check_built_book.check_page(tmp_path, "book/01_cuda_in_python") == ["book/01_cuda_in_python: no HTML page"]
    page = tmp_path / "book" / "01_cuda_in_python.html"
    page.parent.mkdir()
    page.write_text('<html><body><span class="math">x</span> no math script, no images</body></html>')
    problems = check_built_book.check_page(tmp_path, "book/01_cuda_in_python")
    assert any("MathJax" in p for p in problems)
    assert any("figures" in p for p in problems)
    assert any("widget state" in p for p in problems)
    assert any("widget manager" in p for p in problems)


def test_every_toc_page_is_listed():
    pages = check_built_book.toc_pages()
    assert pages[0] == "book/intro" and "book/06_reduction" in pages
