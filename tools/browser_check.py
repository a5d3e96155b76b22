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
* an output or a code cell is wider than its box (text clipped at the right edge);
* a website widget (``.lh-widget``, see ``labhelpers.site_frames``) has a control whose move leaves the picture as
  it was: every control visits up to two other stops and comes back to its start, and each move must change the
  image (a widget that says its live version needs a GPU may keep it);
* text in a figure would be drawn smaller than ``MIN_FONT_PX`` pixels: for a widget, its smallest font (pt), dpi
  and pixel width (written by site_frames) give pt * dpi / 72 * shown width / natural width; for a static figure,
  the smallest font and dpi that ``lh.setup()``'s inline backend writes into the PNG's metadata
  (``labhelpers.plotting.PNG_FONT_KEY``), scaled the same way (a PNG without them: matplotlib's default 10 pt);
* the page's own bytes (the HTML and the images it loads; not the theme's shared scripts, styles and fonts) exceed
  ``PAGE_BUDGET_BYTES``; with every page checked, the built site over ``SITE_BUDGET_BYTES`` fails too.

Screenshots of a few pages are written to ``--screenshots`` (default ``_build/screenshots``) as build artefacts,
and before/after pictures of a few widgets to ``--widget-shots`` (default ``_build/browser``).
Exits 1 with one line per problem.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import unquote, urlparse

from PIL import Image

from check_built_book import toc_pages  # noqa: E402
from labhelpers.plotting import MIN_TEXT_PX, PNG_DPI_KEY, PNG_FONT_KEY

ROOT = Path(__file__).resolve().parents[1]
#: Pages photographed for the build artefacts (when they exist).
SCREENSHOT_PAGES = ("book/intro", "book/01_cuda_in_python", "book/06_reduction", "book/07_profiling_roofline",
                    "labs/05_matrix_multiply_lab")
#: Seconds to wait for MathJax and the widget manager on one page.
PAGE_TIMEOUT_S = 60
VIEWPORT = {"width": 1280, "height": 900}
#: Text in a figure must be drawn at least this many pixels high (font size in px, as CSS counts it).
MIN_FONT_PX = MIN_TEXT_PX
#: matplotlib's default font size (pt) and the dpi the book's setup cell sets: what a static figure whose PNG does not
#: record its smallest font (plotting.PNG_FONT_KEY) is checked at.
STATIC_FONT_PT, STATIC_DPI = 10.0, 100.0
#: A page's own bytes (HTML and images) at most this; the whole built site at most SITE_BUDGET_BYTES.
PAGE_BUDGET_BYTES = 3_000_000
SITE_BUDGET_BYTES = 45_000_000
#: How many widgets get before/after pictures.
WIDGET_SHOTS = 8

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
  const figures = [];
  for (const img of document.querySelectorAll('.cell_output img')) {
    if (img.closest('.lh-widget') || !img.naturalWidth || !img.clientWidth) continue;
    figures.push({src: img.src, shown: img.clientWidth, natural: img.naturalWidth});
  }
  return {views, rendered, untypeset, images, wide, figures};
}
"""

#: In the page: move every control of every .lh-widget and report what did not change the picture.
WIDGETS_JS = r"""
async () => {
  const tick = () => new Promise(r => setTimeout(r, 0));
  const found = [];
  const widgets = [...document.querySelectorAll('.lh-widget')];
  for (const [w, widget] of widgets.entries()) {
    const img = widget.querySelector('img.lh-frame');
    const needsGpu = widget.hasAttribute('data-needs-gpu')
        && /needs a GPU/.test(widget.querySelector('.lh-note').textContent);
    const r = {widget: w, moves: 0, unchanged: [], notes: [], font_px: null};
    if (!widget.querySelector('.lh-note')) r.notes.push('no note saying the values are precomputed');
    const pt = parseFloat(widget.dataset.minFontPt), dpi = parseFloat(widget.dataset.dpi);
    if (img && img.naturalWidth && isFinite(pt)) r.font_px = pt * dpi / 72 * img.clientWidth / img.naturalWidth;
    for (const c of widget.querySelectorAll('[data-control]')) {
      const name = c.closest('label').firstChild.textContent.trim();
      const isRange = c.type === 'range';
      const labels = isRange ? JSON.parse(c.dataset.labels) : [...c.options].map(o => o.textContent);
      if (c.disabled) continue;
      const start = c.value;
      const others = labels.map((_, i) => String(i)).filter(v => v !== start);
      if (!others.length) { r.unchanged.push(`${name} offers one value only`); continue; }
      const picks = others.length <= 2 ? others : [others[others.length - 1], others[Math.floor(others.length / 2)]];
      let before = img.src;
      for (const v of [...picks, start]) {
        c.value = v;
        c.dispatchEvent(new Event('input', {bubbles: true}));
        await tick();
        r.moves += 1;
        if (img.src === before && !needsGpu) r.unchanged.push(`${name} -> ${labels[+v]}`);
        before = img.src;
      }
    }
    found.push(r);
  }
  return found;
}
"""

#: In the page: move the first control of widget ``i`` to its last stop (for the "after" picture), or back.
MOVE_JS = r"""
([i, back]) => {
  const c = document.querySelectorAll('.lh-widget')[i].querySelector('[data-control]');
  if (!c) return false;
  if (back) { c.value = c.dataset.start; } else {
    c.dataset.start = c.value;
    c.value = String((c.type === 'range' ? +c.max : c.options.length - 1));
  }
  c.dispatchEvent(new Event('input', {bubbles: true}));
  return true;
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
    small_text: list[str] = field(default_factory=list)
    widgets: int = 0
    widget_moves: int = 0
    widget_problems: list[str] = field(default_factory=list)
    own_bytes: int = 0

    def problems(self) -> list[str]:
        """One line per defect a reader would meet."""
        out = [f"{self.page}: console error: {e}" for e in self.console_errors]
        if self.rendered != self.views:
            out.append(f"{self.page}: {self.views} widget view(s) saved but {self.rendered} rendered "
                       "(each must render exactly once)")
        out += [f"{self.page}: untypeset math: {m!r}" for m in self.untypeset[:3]]
        out += [f"{self.page}: image does not load: {src}" for src in self.broken_images]
        out += [f"{self.page}: wider than its box, clipped at the right edge: {w}" for w in self.too_wide[:5]]
        out += [f"{self.page}: text too small to read (under {MIN_FONT_PX:g}px): {t}" for t in self.small_text]
        out += [f"{self.page}: {p}" for p in self.widget_problems]
        if self.own_bytes > PAGE_BUDGET_BYTES:
            out.append(f"{self.page}: {self.own_bytes / 1e6:.2f} MB of HTML and images, over the page budget of "
                       f"{PAGE_BUDGET_BYTES / 1e6:g} MB (fewer or lighter frames: labhelpers.site_frames)")
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


def widget_problems(found: list[dict], report: PageReport) -> None:
    """Turn WIDGETS_JS's findings into the report's lines."""
    report.widgets = len(found)
    for w in found:
        report.widget_moves += w["moves"]
        where = f"widget {w['widget'] + 1}"
        report.widget_problems += [f"{where}: {note}" for note in w["notes"]]
        report.widget_problems += [f"{where}: moving {u} leaves the picture unchanged" if "->" in u
                                   else f"{where}: control {u}" for u in w["unchanged"]]
        if w["font_px"] is not None and w["font_px"] < MIN_FONT_PX:
            report.small_text.append(f"{where}: smallest text at {w['font_px']:.1f}px")


def recorded_font(png: Image.Image) -> tuple[float, float]:
    """The smallest font (pt) and dpi an open PNG records (``lh.setup()``'s inline backend writes them), else
    matplotlib's default text size at the book's dpi."""
    text = getattr(png, "text", {})
    if PNG_FONT_KEY in text:
        return float(text[PNG_FONT_KEY]), float(text.get(PNG_DPI_KEY, STATIC_DPI))
    return STATIC_FONT_PT, STATIC_DPI


def png_font(url: str) -> tuple[float, float]:
    """The smallest font (pt) and dpi the PNG at ``url`` records (:func:`recorded_font`); a URL that is not a
    local PNG: matplotlib's default text size at the book's dpi."""
    path = Path(unquote(urlparse(url).path))
    if url.startswith("file:") and path.suffix == ".png" and path.is_file():
        with Image.open(path) as png:
            return recorded_font(png)
    return STATIC_FONT_PT, STATIC_DPI


def shown_font_px(pt: float, dpi: float, shown: float, natural: float) -> float:
    """How many CSS pixels high text of ``pt`` points is on the page: drawn at ``dpi`` into an image ``natural`` px
    wide that the page shows ``shown`` px wide."""
    return pt * dpi / 72 * shown / natural


def static_figure_problems(figures: list[dict]) -> list[str]:
    """One line per static figure whose smallest text is shown under ``MIN_FONT_PX`` (pt * dpi / 72, scaled by
    the width the page shows the image at)."""
    out = []
    for f in figures:
        pt, dpi = png_font(f["src"])
        px = shown_font_px(pt, dpi, f["shown"], f["natural"])
        if px < MIN_FONT_PX:
            out.append(f"static figure {f['src'][-40:]}: smallest text ({pt:g} pt at {dpi:g} dpi) at {px:.1f}px")
    return out


def _file_size(url: str) -> int:
    path = Path(unquote(urlparse(url).path))
    return path.stat().st_size if url.startswith("file:") and path.is_file() else 0


def inspect_pages(html_root: Path, pages: list[str], screenshots: Path | None,
                  widget_shots: Path | None = None) -> list[PageReport]:
    """Load each page offline in headless Chromium and report what it showed."""
    from playwright.sync_api import sync_playwright

    reports = []
    shots_taken = 0
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
            own: dict[str, int] = {}  # the document and its images, by address
            page.on("request", lambda req, own=own: own.setdefault(req.url, _file_size(req.url))
                    if req.resource_type in ("document", "image") else None)
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
            report.small_text = static_figure_problems(seen["figures"])
            report.own_bytes = sum(own.values())
            if widget_shots is not None:
                shots_taken += photograph_widgets(page, page_name, widget_shots, WIDGET_SHOTS - shots_taken)
            widget_problems(page.evaluate(WIDGETS_JS), report)
            if screenshots is not None and page_name in SCREENSHOT_PAGES:
                screenshots.mkdir(parents=True, exist_ok=True)
                page.screenshot(path=str(screenshots / f"{page_name.replace('/', '_')}.png"), full_page=False)
            page.close()
            reports.append(report)
        browser.close()
    return reports


def photograph_widgets(page, page_name: str, folder: Path, at_most: int) -> int:
    """Before and after pictures of the page's first widgets (first control moved to its last stop)."""
    taken = 0
    for i in range(min(at_most, page.locator(".lh-widget").count())):
        folder.mkdir(parents=True, exist_ok=True)
        widget = page.locator(".lh-widget").nth(i)
        widget.scroll_into_view_if_needed()
        stem = f"{page_name.replace('/', '_')}_widget{i + 1}"
        widget.screenshot(path=str(folder / f"{stem}_before.png"))
        if page.evaluate(MOVE_JS, [i, False]):
            widget.screenshot(path=str(folder / f"{stem}_after.png"))
            page.evaluate(MOVE_JS, [i, True])
        taken += 1
    return taken


def site_bytes(html_root: Path) -> int:
    """Bytes of every file of the built site."""
    return sum(f.stat().st_size for f in html_root.rglob("*") if f.is_file())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("html_root", nargs="?", default=str(ROOT / "_build" / "html"))
    parser.add_argument("--screenshots", default=str(ROOT / "_build" / "screenshots"))
    parser.add_argument("--widget-shots", default=str(ROOT / "_build" / "browser"))
    parser.add_argument("--pages", nargs="*", default=None, help="pages to check (default: every page of _toc.yml)")
    args = parser.parse_args()
    pages = args.pages or toc_pages()
    os.environ.setdefault("PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD", "1")
    reports = inspect_pages(Path(args.html_root), pages, Path(args.screenshots), Path(args.widget_shots))
    problems = [p for r in reports for p in r.problems()]
    total = site_bytes(Path(args.html_root))
    if not args.pages and total > SITE_BUDGET_BYTES:
        problems.append(f"the built site is {total / 1e6:.1f} MB, over its budget of {SITE_BUDGET_BYTES / 1e6:g} MB")
    for p in problems:
        print("problem:", p)
    views = sum(r.views for r in reports)
    heaviest = max(reports, key=lambda r: r.own_bytes)
    print(f"browser check: {len(reports)} pages, {views} widget views, {sum(r.widgets for r in reports)} website "
          f"widgets ({sum(r.widget_moves for r in reports)} moves), {len(problems)} problem(s); heaviest page "
          f"{heaviest.page} {heaviest.own_bytes / 1e6:.2f} MB (budget {PAGE_BUDGET_BYTES / 1e6:g}), site "
          f"{total / 1e6:.1f} MB (budget {SITE_BUDGET_BYTES / 1e6:g}); screenshots in {args.screenshots}, "
          f"widgets in {args.widget_shots}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
