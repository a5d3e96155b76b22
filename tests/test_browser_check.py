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
pytestmark = pytest.mark.skipif(not HAVE_BROWSER and not os.environ.get("CI"),
                                reason="no Chromium here: run tools/ensure_browser.sh")

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
