"""The browser test can fail: a page with each defect a reader would meet is reported, a clean one is not.

Needs Chromium (``tools/ensure_browser.sh`` installs it; ``tools/run_tests.sh`` runs that first). Outside CI
the test skips when no Chromium is installed; in CI (``CI`` set) a missing browser fails it.
"""

import os
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

import browser_check  # noqa: E402

HAVE_BROWSER = any(shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome"))
pytestmark = [pytest.mark.backend_independent, pytest.mark.skipif(not HAVE_BROWSER and not os.environ.get("CI"),
                                reason="no Chromium here: run tools/ensure_browser.sh")]

BROKEN = """<html><body>
<script>const X = 1;</script><script>const X = 2;</script>
<span class="math">\\(x^2\\)</span>
<img src="missing.png">
<script type="application/vnd.jupyter.widget-view+json">{"model_id": "m"}</script>
<div class="cell_output" style="width: 300px"><pre style="overflow: hidden">{wide}</pre></div>
</body></html>""".replace("{wide}", "x" * 400)

CLEAN = """<html><body><p>Nothing to see.</p>
<div class="cell_output" style="width: 300px"><pre style="white-space: pre-wrap">short line</pre></div>
</body></html>"""


def test_each_defect_is_reported(tmp_path):
    (tmp_path / "book").mkdir()
    (tmp_path / "book" / "broken.html").write_text(BROKEN)
    (tmp_path / "book" / "clean.html").write_text(CLEAN)
    broken, clean, missing = browser_check.inspect_pages(tmp_path, ["book/broken", "book/clean", "book/nowhere"],
                                                         screenshots=None)
    problems = "\n".join(broken.problems())
    assert "already been declared" in problems  # a script loaded twice
    assert "1 widget view(s) saved but 0 rendered" in problems
    assert "untypeset math" in problems
    assert "image does not load: missing.png" in problems
    assert "clipped at the right edge" in problems
    assert clean.problems() == []
    assert "no such page" in missing.problems()[0]


def _widget_page(tmp_path, *widgets_html: str) -> None:
    """A page of website widgets, wired by the book's own script."""
    (tmp_path / "book").mkdir(exist_ok=True)
    shutil.copy(ROOT / "_vendor" / "lh-widgets.js", tmp_path / "book" / "lh-widgets.js")
    body = "".join(f'<div class="cell_output">{w}</div>' for w in widgets_html)
    (tmp_path / "book" / "widgets.html").write_text(
        f'<html><body><div style="width: 700px">{body}</div><script src="lh-widgets.js"></script></body></html>')


def test_website_widget_controls_must_change_the_picture(tmp_path):
    import labhelpers as lh

    def draw(ax, n, ignored):  # the control "ignored" changes nothing
        ax.bar(range(n), range(n))
        ax.set_title(f"n = {n}", fontsize=12)

    def tiny(ax, n):
        ax.plot([0, n], [0, 1])
        ax.set_title("tiny", fontsize=4)

    good = lh.interactive_figure(draw, figsize=(6, 3), n=(1, 6, 1, 3), ignored=["a", "b", "c"]).site_html
    small = lh.interactive_figure(tiny, figsize=(6, 3), n=(1, 3, 1)).site_html
    _widget_page(tmp_path, good, small)
    (report,) = browser_check.inspect_pages(tmp_path, ["book/widgets"], screenshots=None,
                                            widget_shots=tmp_path / "shots")
    problems = "\n".join(report.problems())
    assert report.widgets == 2 and report.widget_moves >= 3 * 3
    assert "widget 1: moving ignored -> b leaves the picture unchanged" in problems
    assert "moving n ->" not in problems  # n changes the picture: not reported
    assert "widget 2: smallest text at" in problems and "widget 1: smallest text" not in problems
    assert (tmp_path / "shots" / "book_widgets_widget1_before.png").exists()
    assert (tmp_path / "shots" / "book_widgets_widget1_after.png").exists()
    assert not report.console_errors


def test_page_budget(tmp_path, monkeypatch):
    monkeypatch.setattr(browser_check, "PAGE_BUDGET_BYTES", 100)
    (tmp_path / "book").mkdir()
    (tmp_path / "book" / "heavy.html").write_text("<html><body>" + "x" * 500 + "</body></html>")
    (report,) = browser_check.inspect_pages(tmp_path, ["book/heavy"], screenshots=None)
    assert "over the page budget" in "\n".join(report.problems())


def test_static_figure_text_is_read_from_the_png(tmp_path):
    import base64

    import matplotlib.pyplot as plt

    from labhelpers import notebook

    (tmp_path / "book").mkdir()
    for name, size in (("tiny", 5), ("fine", 10)):
        fig, ax = plt.subplots(figsize=(6, 3))
        ax.set_title("x", fontsize=12)
        ax.tick_params(labelsize=size)
        (tmp_path / "book" / f"{name}.png").write_bytes(base64.b64decode(notebook._png_with_font_sizes(fig)))
        plt.close(fig)
    (tmp_path / "book" / "figs.html").write_text(
        '<html><body><div class="cell_output" style="width: 700px"><img src="tiny.png"><img src="fine.png">'
        '</div></body></html>')
    (report,) = browser_check.inspect_pages(tmp_path, ["book/figs"], screenshots=None)
    assert len(report.small_text) == 1 and "tiny.png" in report.small_text[0] and "5 pt" in report.small_text[0]
