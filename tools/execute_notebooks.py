"""Execute notebooks in place under the simulator, the way they are committed.

Usage: python tools/execute_notebooks.py [NOTEBOOK ...]   (default: all of book/ and labs/)

Outputs and widget state are stored (the built book shows the widgets' first figure);
cells tagged ``raises-exception`` may fail, any other error stops with a message.
The kernel runs with LABHELPERS_BACKEND=sim so committed outputs are the ones CI
reproduces with nbval.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient

from notebook_tools import ROOT, all_notebooks


def execute(path: Path, timeout: int = 600) -> float:
    """Execute one notebook in place; return the seconds it took."""
    nb = nbformat.read(path, as_version=4)
    os.environ["LABHELPERS_BACKEND"] = os.environ.get("LABHELPERS_BACKEND", "sim")
    os.environ.setdefault("MPLBACKEND", "module://matplotlib_inline.backend_inline")
    # No progress bars (lh.sweep's tqdm): a saved widget bar would make the website page load the widget manager.
    os.environ.setdefault("TQDM_DISABLE", "1")
    client = NotebookClient(nb, timeout=timeout, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}},
                            store_widget_state=True, record_timing=False)
    start = time.time()
    client.execute()
    for cell in nb.cells:  # keep diffs small and outputs reproducible
        cell.metadata.pop("execution", None)
    nbformat.write(nb, path)
    return time.time() - start


def main(argv: list[str]) -> int:
    paths = [Path(a).resolve() for a in argv] or all_notebooks()
    for path in paths:
        seconds = execute(path)
        print(f"executed {path.relative_to(ROOT)} in {seconds:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
