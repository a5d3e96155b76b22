"""Fold, on the website, the cells whose code only formats a printout of reference numbers (tag ``hide-input``),
and every notebook's setup cell (its first code cell, written by ``tools/sync_setup_cells.py``, which tags it too).

Usage: python tools/fold_cells.py [--check]

The reader of the built book sees such a cell's printout; its code (f-strings over a reference table) stays one
click away. The cells are listed below by notebook and cell id, so the tags can be re-applied after others edit
the notebooks (only the cell's tags change, never its source or outputs). ``--check`` changes nothing and exits 1
when a listed cell is missing or untagged.
"""

from __future__ import annotations

import sys
from pathlib import Path

import nbformat

from notebook_tools import SETUP_MARKER, all_notebooks  # tools/ is on sys.path: run as a script, or by pytest

ROOT = Path(__file__).resolve().parents[1]
TAG = "hide-input"

#: notebook -> ids of the cells that only print reference numbers.
FOLDED: dict[str, tuple[str, ...]] = {
    "book/01_cuda_in_python.ipynb": ("1368d28d",),
    "book/02_bsp_and_amdahl.ipynb": ("4360c74c", "1a7b13bb", "467a2be9", "f4e73681"),
    "book/03_memory_hierarchy.ipynb": ("88b6e2a2", "a585e2fe"),
    "book/04_scheduling.ipynb": ("47ef57a6", "a7b3a13c"),
    "book/05_matrix_multiply.ipynb": ("3320f030", "8fef6516"),
    "book/06_reduction.ipynb": ("3f409c6b", "a708d27f", "2149fdff"),
    "book/07_profiling_roofline.ipynb": ("991b7f37",),
    "book/08_nbody.ipynb": ("7e806a34", "5de62c9b"),
    "book/09_stencils.ipynb": ("e6293455", "2d1be88e"),
    "book/10_scan.ipynb": ("07f8b9ac", "fdcc0d31", "5acf701c", "fea9ad52", "019b7005", "693f2b1c"),
    "book/11_streams.ipynb": ("a94e96ac", "b633e7bb", "414dcb47"),
    "book/12_portability.ipynb": ("1e8d8ad8", "e4fd8159"),
    "book/13_consistency.ipynb": ("7900e67f", "71eea2ed", "fe7bab3a"),
}


def fold(notebook: str, ids: tuple[str, ...], *, write: bool) -> list[str]:
    """Tag the listed cells of one notebook; return what was missing or untagged."""
    path = ROOT / notebook
    nb = nbformat.read(path, as_version=4)
    cells = {cell.get("id"): cell for cell in nb.cells}
    problems, changed = [], False
    for cell_id in ids:
        cell = cells.get(cell_id)
        if cell is None:
            problems.append(f"{notebook}: no cell with id {cell_id} (edit FOLDED in tools/fold_cells.py)")
            continue
        tags = cell.metadata.setdefault("tags", [])
        if TAG not in tags:
            problems.append(f"{notebook}: cell {cell_id} is not tagged {TAG}")
            tags.append(TAG)
            changed = True
    if write and changed:
        nbformat.write(nb, path)
    return problems


def setup_cell_ids() -> dict[str, tuple[str, ...]]:
    """notebook -> the id of its setup cell (the first code cell, when it starts with the setup marker)."""
    out = {}
    for path in all_notebooks():
        code = [c for c in nbformat.read(path, as_version=4).cells if c.cell_type == "code"]
        if code and code[0].source.startswith(SETUP_MARKER):
            out[str(path.relative_to(ROOT))] = (code[0].get("id"),)
    return out


def main(argv: list[str]) -> int:
    check = "--check" in argv
    folded = {**{nb: () for nb in setup_cell_ids()}, **FOLDED}
    for notebook, ids in setup_cell_ids().items():
        folded[notebook] = ids + folded[notebook]
    problems = [p for notebook, ids in folded.items() for p in fold(notebook, ids, write=not check)]
    missing = [p for p in problems if "no cell" in p]
    for p in (problems if check else missing):
        print(p)
    return 1 if (problems if check else missing) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
