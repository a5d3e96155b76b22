"""How large the smallest text of every static figure of executed notebooks is on the website, without building it.

Usage: python tools/figure_fonts.py [--all] [NOTEBOOK ...]   (default: every notebook of book/)

For each ``image/png`` output, reads the smallest font (pt) and dpi that ``lh.setup()``'s inline backend records
in the PNG (``labhelpers.plotting.PNG_FONT_KEY``), and computes the pixels the browser check measures
(``browser_check.shown_font_px``): the page shows an image at its natural width, or shrunk to the book's column
(``plotting.COLUMN_PX``) when it is wider. Prints one line per figure under ``plotting.MIN_TEXT_PX`` (with
``--all``, one per figure) as ``notebook cell-id [n]: px (pt at dpi, width px)``; exits 1 when any is under.
"""

from __future__ import annotations

import argparse
import base64
import io
import sys
from dataclasses import dataclass
from pathlib import Path

import nbformat
from PIL import Image

from browser_check import recorded_font, shown_font_px
from labhelpers.plotting import COLUMN_PX, MIN_TEXT_PX

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class FigureText:
    """The smallest text of one static figure of a notebook, as the website shows it."""

    notebook: str
    cell: str
    index: int  # the figure's place among its cell's PNG outputs
    pt: float
    dpi: float
    width: int  # the PNG's natural width (px)
    px: float  # the smallest text's height on the page (CSS px)

    @property
    def readable(self) -> bool:
        """Whether the smallest text is at least ``MIN_TEXT_PX`` on the page."""
        return self.px >= MIN_TEXT_PX

    def line(self) -> str:
        """``notebook cell [n]: px (pt at dpi, width px)``."""
        return (f"{self.notebook} {self.cell} [{self.index}]: {self.px:.1f}px ({self.pt:g} pt at {self.dpi:g} dpi, "
                f"{self.width}px wide){'' if self.readable else f' < {MIN_TEXT_PX:g}px'}")


def figure_texts(path: Path) -> list[FigureText]:
    """Every ``image/png`` output of the notebook at ``path``, with its smallest text as the website shows it."""
    nb = nbformat.read(path, as_version=4)
    name = str(path.relative_to(ROOT)) if path.resolve().is_relative_to(ROOT) else str(path)
    found = []
    for number, cell in enumerate(nb.cells):
        pngs = [o["data"]["image/png"] for o in cell.get("outputs", []) if "image/png" in o.get("data", {})]
        for index, data in enumerate(pngs):
            with Image.open(io.BytesIO(base64.b64decode(data))) as png:
                pt, dpi = recorded_font(png)
                width = png.width
            px = shown_font_px(pt, dpi, min(width, COLUMN_PX), width)
            found.append(FigureText(name, cell.get("id", f"#{number}"), index, pt, dpi, width, px))
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("notebooks", nargs="*", type=Path, help="executed notebooks (default: book/*.ipynb)")
    parser.add_argument("--all", action="store_true", help="print every figure, not only the unreadable ones")
    args = parser.parse_args(argv)
    paths = args.notebooks or sorted((ROOT / "book").glob("*.ipynb"))
    figures = [f for path in paths for f in figure_texts(path.resolve())]
    small = [f for f in figures if not f.readable]
    for f in figures if args.all else small:
        print(f.line())
    print(f"figure fonts: {len(figures)} static figure(s) in {len(paths)} notebook(s), {len(small)} with text under "
          f"{MIN_TEXT_PX:g}px")
    return 1 if small else 0


if __name__ == "__main__":
    sys.exit(main())
