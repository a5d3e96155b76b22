"""Shared pieces of the notebook tools: the setup cell, the badge, and the notebook list.

The first code cell of every notebook is :func:`setup_cell_source`, built from
``labhelpers/_release.py`` (the one place the release pin lives). The first markdown
cell starts with a ``# Title`` and the Colab badge from :func:`colab_badge`.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from labhelpers._release import RELEASE, REPOSITORY, pip_requirement  # noqa: E402

NOTEBOOK_DIRS = ("book", "labs")
SETUP_MARKER = "# Setup: installs labhelpers when it is missing (Colab), then checks the GPU."


def setup_cell_source() -> str:
    """The exact source of every notebook's first code cell."""
    return "\n".join([
        SETUP_MARKER,
        "import importlib.util",
        'if importlib.util.find_spec("labhelpers") is None:',
        f'    %pip install -q --no-deps "{pip_requirement()}"',
        "    importlib.invalidate_caches()",
        '    %run {importlib.util.find_spec("labhelpers").submodule_search_locations[0]}/install_missing.py',
        "import labhelpers as lh",
        "",
        "lh.setup()",
    ])


def colab_url(relpath: str) -> str:
    """The Colab address that opens notebook ``relpath`` (relative to the repository root) at the release.

    The notebook opened is the one of the release its setup cell installs, so text and package always match.
    """
    github = REPOSITORY.replace("https://github.com/", "")
    return f"https://colab.research.google.com/github/{github}/blob/{RELEASE}/{relpath}"


def colab_badge(relpath: str) -> str:
    """Markdown for the "Open in Colab" link of notebook ``relpath``.

    A text link, not Colab's badge image: the image lives on Colab's server, so a reader of the built book
    without a network saw a broken image (and the browser test a failed request).
    """
    return f"**[Open in Colab]({colab_url(relpath)})** (choose a GPU runtime, then run the first cell)"


def all_notebooks() -> list[Path]:
    """Every committed notebook of the book and the labs, sorted."""
    found: list[Path] = []
    for folder in NOTEBOOK_DIRS:
        found += [p for p in (ROOT / folder).rglob("*.ipynb") if ".ipynb_checkpoints" not in p.parts]
    return sorted(found)
