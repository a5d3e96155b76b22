"""Open every page of the built book in a real headless browser, offline, and fail on what a reader would see.

Usage: python tools/browser_check.py [_build/html] [--screenshots DIR] [--pages book/01_cuda_in_python ...]

Drives the system's Chromium through Playwright (no browser download: ``tools/ensure_browser.sh`` installs
Debian's ``chromium`` when it is missing). Every request that is not a local file is blocked, as on a reader's
machine without a network. A page fails when

* the browser console shows an error or the page throws (a script loaded twice, a missing file...);
* a saved widget view is rendered more or less than once (``<script type="...widget-view+json">`` vs the
  ``.widget-subarea`` elements the widget manager creates for them);
* math is left untypeset (a ``.math`` element without MathJax output);
* an image does not load;
* an output or a code cell is wider than its box (text clipped at the right edge).

Screenshots of a few pages are written to ``--screenshots`` (default ``_build/screenshots``) as build artefacts.
Exits 1 with one line per problem.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path


from check_built_book import toc_pages  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
#: Pages photographed for the build artefacts (when they exist).
SCREENSHOT_PAGES = ("book/intro", "book/01_cuda_in_python", "book/06_reduction", "book/07_profiling_roofline",
                    "labs/05_matrix_multiply_lab")
#: Seconds to wait for MathJax and the widget manager on one page.
PAGE_TIMEOUT_S = 60
VIEWPORT = {"width": 1280, "height": 900}

#: In the page: count what a reader sees. Returns a dict (see PageReport).
INSPECT_JS = r"""
async () => {
  if (window.MathJax && MathJax.startup && MathJax.startup.promise) {
    try { await MathJax.startup.promise; } catch (e) {}
  }
  const views = document.querySelectorAll('script[type="application/vnd.jupyter.widget-view+json"]').length;
  // The widget manager renders asynchronously: wait until every view has its subarea (or time runs out).
  const t0 = Date.now();
  while (views && document.querySelectorAll('.widget-subarea').length < views && Date.now() - t0 < 20000) {
    await new Promise(r => setTimeout(r, 200));
  }
  await new Promise(r => setTimeout(r, 500));
  const rendered = document.querySelectorAll('.widget-subarea').length;
  const untypeset = [...document.querySelectorAll('.math')].filter(e => !e.querySelector('mjx-container')
      && !(e.tagName === 'MJX-CONTAINER')).map(e => e.textContent.slice(0, 60));
  const images = [...document.images].filter(i => !i.complete || i.naturalWidth === 0)
      .map(i => i.getAttribute('src').slice(0, 80));
  const wide = [];
  for (const e of document.querySelectorAll('.cell_output pre, .cell_input pre, .cell_output .output')) {
    if (e.scrollWidth > e.clientWidth + 2) {
      wide.push(`${e.closest('.cell_output') ? 'output' : 'code'} (${e.scrollWidth}px in ${e.clientWidth}px): `
                + e.textContent.trim().split('\n').sort((a, b) => b.length - a.length)[0].slice(0, 70));
    }
  }
  return {views, rendered, untypeset, images, wide};
}
"""


@dataclass
class PageReport:
    """What one page showed the browser."""

    page: str
    console_errors: list[str] = field(default_factory=list)
    views: int = 0
    rendered: int = 0
    untypeset: list[str] = field(default_factory=list)
    broken_images: list[str] = field(default_factory=list)
    too_wide: list[str] = field(default_factory=list)

    def problems(self) -> list[str]:
        """One line per defect a reader would meet."""
        out = [f"{self.page}: console error: {e}" for e in self.console_errors]
        if self.rendered != self.views:
            out.append(f"{self.page}: {self.views} widget view(s) saved but {self.rendered} rendered "
                       "(each must render exactly once)")
        out += [f"{self.page}: untypeset math: {m!r}" for m in self.untypeset[:3]]
        out += [f"{self.page}: image does not load: {src}" for src in self.broken_images]
        out += [f"{self.page}: wider than its box, clipped at the right edge: {w}" for w in self.too_wide[:5]]
        return out


def _short(url: str, html_root: Path) -> str:
    """A failed request's address, relative to the book when it is a local file."""
    prefix = html_root.resolve().as_uri() + "/"
    return url[len(prefix):] if url.startswith(prefix) else url[:120]


def chromium_path() -> str:
    """The system Chromium, or exit with the command that installs it."""
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    sys.exit("error: no Chromium found: run `bash tools/ensure_browser.sh` (Debian/Ubuntu: apt-get install chromium)")


def inspect_pages(html_root: Path, pages: list[str], screenshots: Path | None) -> list[PageReport]:
    """Load each page offline in headless Chromium and report what it showed."""
    from playwright.sync_api import sync_playwright

    reports = []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium_path(), args=["--no-sandbox"])
        context = browser.new_context(viewport=VIEWPORT)
        context.route("**/*", lambda route: route.continue_() if route.request.url.startswith("file:")
                      else route.abort())
        for page_name in pages:
            path = html_root / f"{page_name}.html"
            report = PageReport(page_name)
            if not path.exists():
                report.console_errors.append("no such page (was the book built?)")
                reports.append(report)
                continue
            page = context.new_page()
            # "Failed to load resource" names no file: the requestfailed handler reports the address instead.
            page.on("console", lambda msg, r=report: r.console_errors.append(msg.text[:200])
                    if msg.type == "error" and not msg.text.startswith("Failed to load resource") else None)
            page.on("requestfailed", lambda req, r=report, root=html_root: r.console_errors.append(
                f"could not load {_short(req.url, root)} ({req.failure})"))
            page.on("pageerror", lambda exc, r=report: r.console_errors.append(f"uncaught: {str(exc)[:200]}"))
            page.goto(path.resolve().as_uri(), wait_until="load", timeout=PAGE_TIMEOUT_S * 1000)
            seen = page.evaluate(INSPECT_JS)
            report.views, report.rendered = seen["views"], seen["rendered"]
            report.untypeset, report.broken_images, report.too_wide = seen["untypeset"], seen["images"], seen["wide"]
            if screenshots is not None and page_name in SCREENSHOT_PAGES:
                screenshots.mkdir(parents=True, exist_ok=True)
                page.screenshot(path=str(screenshots / f"{page_name.replace('/', '_')}.png"), full_page=False)
            page.close()
            reports.append(report)
        browser.close()
    return reports


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("html_root", nargs="?", default=str(ROOT / "_build" / "html"))
    parser.add_argument("--screenshots", default=str(ROOT / "_build" / "screenshots"))
    parser.add_argument("--pages", nargs="*", default=None, help="pages to check (default: every page of _toc.yml)")
    args = parser.parse_args()
    pages = args.pages or toc_pages()
    os.environ.setdefault("PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD", "1")
    reports = inspect_pages(Path(args.html_root), pages, Path(args.screenshots))
    problems = [p for r in reports for p in r.problems()]
    for p in problems:
        print("problem:", p)
    views = sum(r.views for r in reports)
    print(f"browser check: {len(reports)} pages, {views} widget views, {len(problems)} problem(s); "
          f"screenshots in {args.screenshots}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
