"""Execute notebooks in place under the simulator, the way they are committed.

Usage: python tools/execute_notebooks.py [--times FILE] [--no-write] [NOTEBOOK ...]   (default: all of book/ and labs/)

Outputs and widget state are stored (the built book shows the widgets' first figure);
cells tagged ``raises-exception`` may fail, any other error stops with a message.
The kernel runs with LABHELPERS_BACKEND=sim so committed outputs are the ones CI
reproduces with nbval.

``--times FILE`` records every code cell's wall time (and the notebook's) in FILE, a JSON object keyed by
notebook, with the machine's GPU (or the simulator) in its ``meta``: on the GPU machine,
``LABHELPERS_BACKEND=gpu python tools/execute_notebooks.py --no-write --times $OUT/cell_times.json book/*.ipynb``
measures what ``labhelpers.runtime_estimate`` reads (``src/labhelpers/data/cell_times.json``). ``--no-write``
leaves the notebooks as they are (GPU outputs are never committed).
"""

from __future__ import annotations

import datetime
import json
import os
import sys
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError

from notebook_tools import ROOT, all_notebooks


def _seconds(execution: dict) -> float | None:
    """A cell's wall time from nbclient's timing record (execute input to reply), or None."""
    try:
        start = datetime.datetime.fromisoformat(execution["iopub.execute_input"].replace("Z", "+00:00"))
        end = datetime.datetime.fromisoformat(execution["shell.execute_reply"].replace("Z", "+00:00"))
    except (KeyError, ValueError, AttributeError):
        return None
    return (end - start).total_seconds()


def execute(path: Path, timeout: int = 600, write: bool = True) -> tuple[float, list[list]]:
    """Execute one notebook (in place unless ``write`` is False); return its seconds and ``[cell, seconds]`` pairs."""
    nb = nbformat.read(path, as_version=4)
    os.environ["LABHELPERS_BACKEND"] = os.environ.get("LABHELPERS_BACKEND", "sim")
    os.environ.setdefault("MPLBACKEND", "module://matplotlib_inline.backend_inline")
    # No progress bars (lh.sweep's tqdm): a saved widget bar would make the website page load the widget manager.
    os.environ.setdefault("TQDM_DISABLE", "1")
    client = NotebookClient(nb, timeout=timeout, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}},
                            store_widget_state=True, record_timing=True)
    start = time.time()
    client.execute()
    cells = []
    for index, cell in enumerate(nb.cells):  # keep diffs small and outputs reproducible
        seconds = _seconds(cell.metadata.pop("execution", None) or {})
        if cell.cell_type == "code" and seconds is not None:
            cells.append([index, round(seconds, 3)])
    if write:
        nbformat.write(nb, path)
    return time.time() - start, cells


def _machine() -> dict:
    """What the notebooks ran on, for the timing file (imports labhelpers only here, in this process)."""
    import labhelpers as lh  # noqa: E402  (after the backend variable is set)

    info = lh.device_info()
    return {"gpu": info.name, "backend": info.backend, "compute_capability": info.cc, "sm_count": info.sm_count,
            "date": datetime.date.today().isoformat()}


def main(argv: list[str]) -> int:
    args = list(argv)
    write = "--no-write" not in args
    args = [a for a in args if a != "--no-write"]
    times_file = None
    if "--times" in args:
        i = args.index("--times")
        times_file = Path(args[i + 1])
        del args[i:i + 2]
    paths = [Path(a).resolve() for a in args] or all_notebooks()
    os.environ["LABHELPERS_BACKEND"] = os.environ.get("LABHELPERS_BACKEND", "sim")
    record = {"meta": _machine(), "notebooks": {}} if times_file else None
    failed = 0
    for path in paths:
        try:
            seconds, cells = execute(path, write=write)
        except CellExecutionError as exc:
            if record is None:
                raise
            failed += 1  # a timing run goes on with the next notebook; this one is left out of the record
            print(f"FAILED {path.relative_to(ROOT)}: {str(exc).strip().splitlines()[-1]}")
            continue
        print(f"executed {path.relative_to(ROOT)} in {seconds:.1f} s")
        if record is not None:  # written after every notebook, so a run stopped midway keeps what it measured
            record["notebooks"][str(path.relative_to(ROOT))] = {"seconds": round(seconds, 1), "cells": cells}
            times_file.parent.mkdir(parents=True, exist_ok=True)
            times_file.write_text(json.dumps(record, indent=1) + "\n")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
