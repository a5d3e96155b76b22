"""The book's structure: every table-of-contents entry exists, and every notebook has the same anatomy.

Each notebook starts with a title, the Colab badge pointing at itself, and the setup cell
written by ``tools/notebook_tools.py`` (the one place the release pin lives): five lines at most, tagged
``hide-input`` so that the website folds it; it carries
outputs, executed in order, without unexpected errors. nbval (run separately) checks the
outputs themselves. ``tests/test_chapters.py`` checks what every chapter adds (where its code lives, its
expected time, a declared "not yet shipped" note).

A notebook in full, for writing one:

1. Markdown: ``# Title``, the Colab badge (``tools/sync_setup_cells.py`` rewrites it), what the reader will learn.
2. The setup cell: five lines (install labhelpers if missing, ``install_missing.setup()``, ``import labhelpers as
   lh``, ``lh.setup()``), tagged ``hide-input``; run ``python tools/sync_setup_cells.py`` after creating a notebook
   whose first code cell starts with the setup marker. Extras a chapter asks for: ``NEEDS`` in
   ``tools/notebook_tools.py``. In a lab, import ``labhelpers as lh`` again in the next cell (``tests/test_labs.py``
   replays cells without the setup cell).
3. The chapter: prose before each code cell; short cells ending in a bare expression; a naive attempt, then the fix.
   Measured or reused kernels live in ``labhelpers.kernels`` and are shown with ``lh.show_source``.
- Sizes: ``lh.problem_size(gpu=..., sim=...)`` (the simulator runs a few thousand threads per second);
  ``lh.fp64_problem_size`` for float64 work. Never rebind a module constant between cells (Numba freezes globals).
- Timing: ``lh.benchmark`` (the GPU's own time; ``clock="python"`` only where the launch cost is the lesson, said in
  a comment and in the figure; ``flush_l2=True`` for data that fits in L2); under the simulator it has no numbers.
- Measured numbers: ``m = lh.live_or_reference(lambda: experiments.topic.sweep_x(...), "chNN_name")``; ``m.table``
  has the same typed columns either way, ``m.label`` names the machine, ``lh.plot_comparison(..., live=m)`` draws it,
  ``print(m.source_line())`` prints the ``Data source:`` line. A table a bench adds before any GPU run collected it:
  ``try: ... except FileNotFoundError: print(...)``, and the chapter's ``awaiting`` in ``labhelpers.chapters``.
- Labels and answers take the machine's numbers from the hardware description, never Hopper's by hand.
- Both backends pass strict nbval: a cell that checks correctness prints the same on both; machine-dependent output
  goes in its own cell tagged ``nbval-ignore-output`` whose first line is ``# machine-dependent output: <why>``.
  ``tests/nbval_sanitize.cfg`` hides the banner, progress bars, ``Data source:`` lines and figure sizes.
- Tags: ``hide-input``, ``raises-exception`` (a pitfall on purpose, or a lab's check cell; in a lab a pitfall is
  also tagged ``pitfall``), ``nbval-ignore-output``, ``skeleton`` and ``exercise`` (labs).
- Figures: end the cell with ``plt.show()`` (the inline backend would show an open figure twice under nbval); at most
  9.4 inches wide, text at least ``plotting.readable_pt(fig)``; fold cells that only print reference numbers in
  ``tools/fold_cells.py``. Shared-array shapes are literals or module constants (a GPU will not compile others).
- "Check yourself" closes a chapter: 3 to 10 questions, answers in ``<details><summary>Answer</summary>...</details>``.
- Math ``$...$``; citations in plain text by author and year with an entry in ``book/references.bib``; no Sphinx
  directives in markdown (Colab shows them raw).
"""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]

from notebook_tools import all_notebooks, colab_badge, setup_cell_source  # noqa: E402

pytestmark = pytest.mark.backend_independent  # no kernel, no measurement: CI runs it (see conftest.py)

NOTEBOOKS = all_notebooks()
IDS = [str(p.relative_to(ROOT)) for p in NOTEBOOKS]


def _toc_files() -> list[str]:
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    files = [toc["root"]]
    for part in toc.get("parts", []):
        for chapter in part.get("chapters", []):
            files.append(chapter["file"])
            files += [s["file"] for s in chapter.get("sections", [])]
    return files


def _resolve(entry: str) -> Path | None:
    for suffix in ("", ".ipynb", ".md"):
        path = ROOT / (entry + suffix)
        if path.is_file():
            return path
    return None


def test_every_toc_entry_exists():
    missing = [f for f in _toc_files() if _resolve(f) is None]
    assert not missing, f"_toc.yml lists files that do not exist: {missing}"


def test_every_notebook_is_in_the_toc():
    listed = {_resolve(f) for f in _toc_files()}
    orphans = [i for p, i in zip(NOTEBOOKS, IDS) if p not in listed]
    assert not orphans, f"notebooks missing from _toc.yml: {orphans}"


def test_there_are_chapters_and_labs():
    assert any(i.startswith("book/") for i in IDS) and any(i.startswith("labs/") for i in IDS)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_notebook_anatomy(path: Path):
    nb = nbformat.read(path, as_version=4)
    rel = str(path.relative_to(ROOT))
    first = nb.cells[0]
    assert first.cell_type == "markdown" and first.source.startswith("# "), f"{rel}: must start with a '# Title' cell"
    assert colab_badge(rel) in first.source, (
        f"{rel}: the first cell needs its Colab badge: copy the '**[Open in Colab](...)**' line of another notebook "
        "and run tools/sync_setup_cells.py, which writes its address")
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert code and code[0].source == setup_cell_source(rel), (
        f"{rel}: the first code cell must be the setup cell (run tools/sync_setup_cells.py)")
    assert "hide-input" in code[0].metadata.get("tags", []), (
        f"{rel}: the setup cell must be folded on the website (tag hide-input: tools/sync_setup_cells.py)")


@pytest.mark.parametrize("rel", ["book/01_cuda_in_python.ipynb", "labs/12_portability_lab.ipynb"])
def test_setup_cell_is_at_most_five_lines(rel: str):
    """The reader's first screen: install if missing, import, lh.setup(); the rest is in install_missing.py."""
    lines = setup_cell_source(rel).splitlines()
    assert len(lines) <= 5, f"the setup cell has {len(lines)} lines:\n" + "\n".join(lines)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_notebook_is_executed_in_order_without_unexpected_errors(path: Path):
    nb = nbformat.read(path, as_version=4)
    rel = str(path.relative_to(ROOT))
    code = [c for c in nb.cells if c.cell_type == "code" and c.source.strip()]
    counts = [c.execution_count for c in code]
    assert all(n is not None for n in counts), f"{rel}: not executed (tools/execute_notebooks.py)"
    assert counts == list(range(1, len(counts) + 1)), f"{rel}: executed out of order: {counts}"
    assert any(c.outputs for c in code), f"{rel}: carries no outputs"
    for cell in code:
        errors = [o for o in cell.outputs if o.output_type == "error"]
        tags = cell.metadata.get("tags", [])
        if errors:
            assert "raises-exception" in tags, f"{rel}: unexpected error in cell:\n{cell.source[:200]}"
        if "raises-exception" in tags:
            assert errors, f"{rel}: a cell tagged raises-exception did not raise:\n{cell.source[:200]}"
        streams = [o for o in cell.outputs if o.output_type == "stream" and o.name == "stderr"]
        for s in streams:
            assert "Warning" not in s.text, f"{rel}: a warning leaked into the output:\n{s.text[:300]}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_notebook_is_not_too_large(path: Path):
    assert path.stat().st_size < 3_000_000, f"{path.name} is over 3 MB: reduce figure sizes or output"


#: What an absolute path of whoever executed a notebook looks like in its outputs.
MACHINE_PATHS = ("/work/", "/home/", "/root/", "/tmp/", "site-packages", "dist-packages")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_outputs_name_no_path_of_the_machine_that_ran_them(path: Path):
    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            text = out.get("text", "") + "".join(out.get("traceback", [])) + str(out.get("data", {}).get("text/plain", ""))
            found = [p for p in MACHINE_PATHS if p in text]
            assert not found, f"{path.name}: an output shows {found[0]!r} (a path of the machine that ran it):\n{text[:300]}"
