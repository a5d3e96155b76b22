"""Rewrite the setup cell and the Colab badge of every notebook from the one template.

The setup cell also gets the ``hide-input`` tag, so the website folds it like the other plumbing
(``tools/fold_cells.py``): the reader sees its output (the banner) and a toggle, not its five lines.

Usage: python tools/sync_setup_cells.py [--check]

With --check nothing is written; the exit status is 1 if a notebook is out of date.
"""

from __future__ import annotations

import re
import sys

import nbformat

from notebook_tools import ROOT, SETUP_MARKER, all_notebooks, colab_badge, setup_cell_source

#: The tag that folds a cell's code on the website (Jupyter Book shows its output and a "show code" toggle).
FOLD_TAG = "hide-input"

#: The Colab link as written now, and the image badge earlier notebooks carried.
BADGE_RE = re.compile(r"\[!\[Open In Colab\]\([^)]*\)\]\([^)]*\)|\*\*\[Open in Colab\]\([^)]*\)\*\*"
                      r"(?: \(choose a GPU runtime, then run the first cell\))?")


def sync(nb: nbformat.NotebookNode, relpath: str) -> bool:
    """Update ``nb`` in place; return True if anything changed."""
    changed = False
    code = [c for c in nb.cells if c.cell_type == "code"]
    if code and code[0].source.startswith(SETUP_MARKER):
        if code[0].source != setup_cell_source(relpath):
            code[0].source = setup_cell_source(relpath)
            changed = True
        tags = code[0].metadata.setdefault("tags", [])
        if FOLD_TAG not in tags:
            tags.append(FOLD_TAG)
            changed = True
    md = [c for c in nb.cells if c.cell_type == "markdown"]
    if md and BADGE_RE.search(md[0].source):
        new = BADGE_RE.sub(colab_badge(relpath), md[0].source)
        changed |= new != md[0].source
        md[0].source = new
    return changed


def main() -> int:
    check = "--check" in sys.argv
    stale = []
    for path in all_notebooks():
        nb = nbformat.read(path, as_version=4)
        rel = str(path.relative_to(ROOT))
        if sync(nb, rel):
            stale.append(rel)
            if not check:
                nbformat.write(nb, path)
    for rel in stale:
        print(("out of date: " if check else "updated: ") + rel)
    return 1 if (check and stale) else 0


if __name__ == "__main__":
    sys.exit(main())
