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

from labhelpers._release import REPOSITORY, pip_requirement  # noqa: E402

NOTEBOOK_DIRS = ("book", "labs")
SETUP_MARKER = "# Setup: installs labhelpers when it is missing (Colab), then checks the GPU."


def setup_cell_source() -> str:
    """The exact source of every notebook's first code cell."""
    return "\n".join([
        SETUP_MARKER,
        "import importlib.util",
        'if importlib.util.find_spec("labhelpers") is None:',
        f'    %pip install -q "{pip_requirement()}"',
        "import labhelpers as lh",
        "",
        "lh.setup()",
    ])


def colab_url(relpath: str) -> str:
    """The Colab address that opens notebook ``relpath`` (relative to the repository root)."""
    github = REPOSITORY.replace("https://github.com/", "")
    return f"https://colab.research.google.com/github/{github}/blob/main/{relpath}"


def colab_badge(relpath: str) -> str:
    """Markdown for the "Open in Colab" badge of notebook ``relpath``."""
    return (f"[![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)]"
            f"({colab_url(relpath)})")


def all_notebooks() -> list[Path]:
    """Every committed notebook of the book and the labs, sorted."""
    found: list[Path] = []
    for folder in NOTEBOOK_DIRS:
        found += [p for p in (ROOT / folder).rglob("*.ipynb") if ".ipynb_checkpoints" not in p.parts]
    return sorted(found)
