"""What the tuning sweeps of ``bench/tuning/`` share: the GPU backend chosen before labhelpers is imported, an
import that says what to do when the package or the GPU is missing, and the command line every sweep takes.

    python bench/tuning/<sweep>.py [--quick] [--out table.csv]

A sweep module calls :func:`import_labhelpers` before it imports anything of the package, defines
``sweep(quick) -> DataFrame`` (with an ``ok`` column) and ``show(table)``, and ends with
``sys.exit(run(__file__, __doc__, sweep, show, quick_help=...))``.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Callable

os.environ.setdefault("LABHELPERS_BACKEND", "gpu")  # before labhelpers is imported: it chooses the backend


def _needs_gpu(script: str) -> str:
    return f"error: bench/tuning/{Path(script).name} needs a CUDA GPU"


def import_labhelpers(script: str):
    """``labhelpers``, or exit with one line: how to install it, or that this machine has no GPU."""
    try:
        import labhelpers as lh
    except ModuleNotFoundError as exc:  # not installed: say how, instead of a traceback
        if exc.name != "labhelpers":
            raise
        sys.exit("error: the sweep imports the package: install it (`pip install -e .`) or set PYTHONPATH=src")
    except RuntimeError as exc:  # LABHELPERS_BACKEND=gpu (the default here) and no GPU: labhelpers' NoGPUError
        if type(exc).__name__ != "NoGPUError":
            raise
        sys.exit(f"{_needs_gpu(script)}: the CUDA driver reports none")
    return lh


def run(script: str, doc: str, sweep: Callable, show: Callable, *, quick_help: str) -> int:
    """The command line: run ``sweep(--quick)`` on a GPU, ``show`` the table, write it to ``--out`` as CSV.

    Returns:
        0 when every row is ``ok``, else 1 (the table is printed and written either way).
    """
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help=quick_help)
    parser.add_argument("--out", default=None, help="write the table as CSV to this path")
    args = parser.parse_args()
    lh = import_labhelpers(script)
    if lh.is_simulator():
        sys.exit(f"{_needs_gpu(script)}: this is Numba's CUDA simulator, whose timings say nothing about a GPU")
    print(lh.banner())
    table = sweep(args.quick)
    show(table)
    if args.out:
        table.to_csv(args.out, index=False)
        print(f"wrote {args.out}")
    return 0 if table["ok"].all() else 1
