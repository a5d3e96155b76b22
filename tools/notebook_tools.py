"""Shared pieces of the notebook tools: the setup cell, the badge, and the notebook list.

The first code cell of every notebook is :func:`setup_cell_source`, built from
``labhelpers/_release.py`` (the one place the release pin lives). The first markdown
cell starts with a ``# Title`` and the Colab badge from :func:`colab_badge`.
"""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

from labhelpers._release import NO_RELEASE_HINT, RELEASE, REPOSITORY, pip_requirement  # noqa: E402

NOTEBOOK_DIRS = ("book", "labs")
SETUP_MARKER = "# Setup: installs labhelpers when it is missing (Colab), then checks the GPU."
#: Extras of labhelpers a chapter needs beyond the GPU's (by the start of the notebook's file name): the setup
#: cell asks ``install_missing.py`` for them.
NEEDS = {"12_portability": ("opencl",)}


def needs(relpath: str | None) -> tuple[str, ...]:
    """The extras notebook ``relpath`` asks its setup cell for (``("opencl",)`` for chapter 12 and its lab)."""
    name = Path(relpath).name if relpath else ""
    return next((extras for prefix, extras in NEEDS.items() if name.startswith(prefix)), ())


def setup_cell_source(relpath: str | None = None) -> str:
    """The exact source of the first code cell of notebook ``relpath`` (relative to the repository root).

    Where labhelpers is installed (a course checkout's .venv, a GPU image) it only imports it. Where it is
    missing (Colab) it installs it without its dependencies, from a ``labhelpers-*.whl`` in the notebook's folder
    if there is one, else from the release, then runs ``install_missing.py``, which installs what the runtime
    lacks and nothing it has. Every failure ends the cell with one message (``_render_traceback_``: IPython
    shows it without a traceback) saying what to do.
    """
    extras = needs(relpath)
    return "\n".join([
        SETUP_MARKER,
        "import importlib.util",
        'if importlib.util.find_spec("labhelpers") is None:',
        "    import glob, runpy, subprocess, sys",
        "",
        "    class SetupStopped(Exception):  # shows its message alone, without a traceback",
        "        def _render_traceback_(self):",
        "            return [str(self)]",
        "",
        '    wheels = sorted(glob.glob("labhelpers-*.whl"))',
        f'    source = wheels[-1] if wheels else "{pip_requirement()}"',
        '    pip = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", source],',
        "                         capture_output=True, text=True)",
        "    if pip.returncode:",
        '        said = (pip.stderr.strip().splitlines() or ["no message"])[-1]',
        f'        raise SetupStopped(f"labhelpers could not be installed from {{source}} (pip: {{said}}). "',
        *[f'                           "{chunk}"' + (")" if last else "")
          for last, chunk in _last_flags(textwrap.wrap(NO_RELEASE_HINT, 84, drop_whitespace=False))],
        "    importlib.invalidate_caches()",
        '    folder = importlib.util.find_spec("labhelpers").submodule_search_locations[0]',
        '    runpy.run_path(folder + "/install_missing.py")["main"](' + (f"needs={json.dumps(list(extras))}" if extras else "") + ")",
        "import labhelpers as lh",
        "",
        "lh.setup()",
    ])


def _last_flags(items: list[str]) -> list[tuple[bool, str]]:
    """``(is_last, item)`` for each of ``items``."""
    return [(i == len(items) - 1, item) for i, item in enumerate(items)]


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
