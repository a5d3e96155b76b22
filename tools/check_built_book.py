"""Check the built HTML book: every page of the table of contents exists and shows what it should.

Usage: python tools/check_built_book.py [_build/html]

For each notebook page: at least one figure, no error output except cells tagged
``raises-exception`` (rendered, not hidden), every saved widget shown (as a widget view, with the saved
widget state and the vendored widget manager, or as a website widget of precomputed frames, which needs
neither: then the page must not load the manager), and math typeset by the vendored MathJax (no
network needed to read the book).
Exits 1 with a list of problems.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


def toc_pages() -> list[str]:
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    pages = [toc["root"]]
    for part in toc.get("parts", []):
        pages += [c["file"] for c in part.get("chapters", [])]
    return pages


def check_page(html_root: Path, page: str) -> list[str]:
    problems = []
    html_path = html_root / f"{page}.html"
    if not html_path.exists():
        return [f"{page}: no HTML page"]
    html = html_path.read_text(encoding="utf-8")
    # Sphinx loads MathJax only on pages with math; where it does, it must be the vendored copy (no network).
    if 'class="math' in html and "_static/mathjax/tex-mml-chtml.js" not in html:
        problems.append(f"{page}: math is not typeset by the vendored MathJax")
    source = ROOT / f"{page}.ipynb"
    if source.exists():
        nb = json.loads(source.read_text())
        has_images = any("image/png" in o.get("data", {}) for c in nb["cells"] for o in c.get("outputs", []))
        if has_images and not re.search(r"<img[^>]+src=\"[^\"]*\.png\"", html):
            problems.append(f"{page}: the notebook has figures but the page shows none")
        saved = sum(WIDGET_VIEW in o.get("data", {}) for c in nb["cells"] for o in c.get("outputs", []))
        views = html.count(f'type="{WIDGET_VIEW}"')
        site = html.count('class="lh-widget"')
        if views + site < saved:
            problems.append(f"{page}: {saved} widget(s) saved but the page shows {views} widget view(s) and {site} "
                            "website widget(s)")
        if views:  # a page that still shows a saved widget view needs its state and the vendored manager
            if "application/vnd.jupyter.widget-state+json" not in html:
                problems.append(f"{page}: the notebook's widget state is not embedded (widgets would be blank)")
            if "_static/widgets/embed-amd.js" not in html:
                problems.append(f"{page}: widgets are not rendered by the vendored widget manager (needs a network)")
        elif "_static/widgets/embed-amd.js" in html:
            problems.append(f"{page}: loads the 4 MB widget manager but shows no widget view")
        if 'class="output traceback' in html and not any("raises-exception" in c.get("metadata", {}).get("tags", [])
                                           for c in nb["cells"]):
            problems.append(f"{page}: shows a traceback but no cell is tagged raises-exception")
    return problems


def main() -> int:
    html_root = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "_build" / "html"
    problems = [p for page in toc_pages() for p in check_page(html_root, page)]
    for p in problems:
        print("problem:", p)
    print(f"checked {len(toc_pages())} pages of {html_root}: {len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
