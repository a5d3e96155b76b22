"""Shared pieces of the notebook tools: the setup cell, the badge, and the notebook list.

The first code cell of every notebook is :func:`setup_cell_source`, built from
``labhelpers/_release.py`` (the one place the release pin lives). The first markdown
cell starts with a ``# Title`` and the Colab badge from :func:`colab_badge`.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

from labhelpers._release import RELEASE, REPOSITORY  # noqa: E402

NOTEBOOK_DIRS = ("book", "labs")
SETUP_MARKER = "# Setup: installs labhelpers when it is missing (Colab), then checks the GPU."
#: Extras of labhelpers a chapter needs beyond the GPU's (by the start of the notebook's file name): the setup
#: cell asks ``install_missing.py`` for them.
NEEDS = {"12_portability": ("opencl",)}
#: What the setup cell says when labhelpers itself could not be installed (no wheel here, the release unreachable).
#: README.md ("On a GPU", Colab) says how to build the wheel.
NOT_INSTALLED = "labhelpers is not installed: put a labhelpers-*.whl next to this notebook, then run this cell again"


def needs(relpath: str | None) -> tuple[str, ...]:
    """The extras notebook ``relpath`` asks its setup cell for (``("opencl",)`` for chapter 12 and its lab)."""
    name = Path(relpath).name if relpath else ""
    return next((extras for prefix, extras in NEEDS.items() if name.startswith(prefix)), ())


def setup_cell_source(relpath: str | None = None) -> str:
    """The exact source of the first code cell of notebook ``relpath`` (relative to the repository root): 5 lines.

    Where labhelpers is installed (a course checkout's .venv, a GPU image) the ``if`` is skipped. Where it is
    missing (Colab) the kernel's pip installs it without its dependencies, from a ``labhelpers-*.whl`` in the
    notebook's folder if there is one (``--no-index -f .``), else from the release. The last line runs
    ``labhelpers/install_missing.py`` by its path (not imported: labhelpers' dependencies may be what is missing)
    and calls its :func:`setup`, which installs what the runtime lacks, then imports labhelpers, runs
    ``lh.setup()`` and returns the module. Every failure of the installer stops the cell with one message
    (``SetupStopped``: no traceback); when labhelpers itself could not be installed, ``sys.exit`` stops it with
    :data:`NOT_INSTALLED` (IPython shows a ``SystemExit`` without a traceback), below pip's own message.
    """
    extras = needs(relpath)
    return "\n".join([
        SETUP_MARKER,
        "from importlib.util import find_spec; import runpy, sys",
        'if find_spec("labhelpers") is None:  # from a labhelpers-*.whl next to this notebook, else the release',
        "    !{sys.executable} -m pip install -q --no-deps --no-index -f . labhelpers 2>/dev/null"
        f" || {{sys.executable}} -m pip install -q --no-deps {release_url()}",
        f'lh = runpy.run_path((find_spec("labhelpers") or sys.exit("{NOT_INSTALLED}"))'
        f'.origin.replace("__init__", "install_missing"))["setup"]({json.dumps(list(extras)) if extras else ""})',
    ])


def release_url() -> str:
    """The release as pip installs it from the command line, without quotes: ``git+<repository>@<release>``."""
    return f"git+{REPOSITORY}@{RELEASE}"


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
