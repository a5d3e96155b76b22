"""Lab solutions, lab skeletons and kernel mutants for the tests: one source for every kernel a test runs.

* :func:`load_solutions` imports ``labs/solutions/<lab>.py``; :func:`lab_skeletons` runs the cells
  tagged ``skeleton`` of ``labs/<lab>.ipynb`` exactly as committed. Tests take both from there
  instead of keeping copies.
* :func:`mutant` is a real kernel (a lab solution or a package kernel) with one or two lines
  replaced, compiled like the original: a test names the bug in a line, and the rest of the
  kernel is the tested one. The line to replace must be in the kernel exactly once, so a mutant
  whose kernel changed fails loudly instead of silently testing something else.

Every function compiled here keeps its source in :mod:`linecache`, so checkers that read a
kernel's source (``inspect.getsource``) see the mutant's or the skeleton's text.
"""

from __future__ import annotations

import ast
import importlib.util
import inspect
import itertools
import linecache
import textwrap
from pathlib import Path
from types import ModuleType
from typing import Any, Callable

import nbformat

import labhelpers  # noqa: F401  (chooses GPU or simulator before numba.cuda is imported)
from numba import cuda  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
_serial = itertools.count()


def load_solutions(lab: str) -> ModuleType:
    """The solutions module of ``labs/<lab>.ipynb`` (``labs/solutions/<lab>.py``), freshly imported."""
    path = ROOT / "labs" / "solutions" / f"{lab}.py"
    spec = importlib.util.spec_from_file_location(f"solutions_{lab}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _run(source: str, namespace: dict, what: str) -> dict:
    """Execute ``source`` in ``namespace`` under a file name that :mod:`linecache` (hence ``inspect``) knows."""
    filename = f"<{what} #{next(_serial)}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(keepends=True), filename)
    exec(compile(source, filename, "exec"), namespace)
    return namespace


def lab_skeletons(lab: str, header: str = "", **names: Any) -> dict[str, Any]:
    """The functions and kernels defined by the ``skeleton`` cells of ``labs/<lab>.ipynb``, by name.

    ``header`` is run first: the imports and constants the skeleton cells take from earlier cells;
    ``names`` are bound before it (functions of earlier cells, e.g. a specification).
    """
    nb = nbformat.read(ROOT / "labs" / f"{lab}.ipynb", as_version=4)
    cells = [c.source for c in nb.cells if c.cell_type == "code" and "skeleton" in c.metadata.get("tags", [])]
    assert cells, f"labs/{lab}.ipynb has no cell tagged skeleton"
    source = header + "\n\n" + "\n\n".join(
        "\n".join(line for line in cell.splitlines() if not line.lstrip().startswith("%")) for cell in cells) + "\n"
    namespace = _run(source, dict(names), f"skeletons of {lab}")
    return {node.name: namespace[node.name] for node in ast.parse(source).body if isinstance(node, ast.FunctionDef)}


def source(kernel: Any) -> str:
    """The dedented source of a function or of a Numba kernel / device function (its ``py_func``)."""
    return textwrap.dedent(inspect.getsource(getattr(kernel, "py_func", kernel)))


def _code(line: str) -> str:
    """A line without its trailing comment, stripped."""
    return line.split("  #")[0].strip()


def mutant(kernel: Any, *edits: Any, name: str | None = None, jit: Callable | None = None):
    """``kernel`` with lines replaced, compiled with ``cuda.jit`` in the kernel's own globals and closure.

    ``mutant(k, old, new)`` replaces the line ``old``; ``mutant(k, (old, new), (old2, new2))`` several.
    ``old`` is a line of the kernel without its indentation (its trailing comment may be left out) and
    must occur exactly once; a line the kernel has several times is named ``(old, new, occurrence)``
    (1 for the first) and must occur exactly that many times or more. ``new`` takes its indentation;
    it may span several lines (indented relative to its first) or be empty (the line is deleted).

    Raises:
        AssertionError: ``old`` is not in the kernel as stated (the kernel changed: update the test).
    """
    if len(edits) in (2, 3) and all(isinstance(e, (str, int)) for e in edits):
        edits = (tuple(edits),)
    func = getattr(kernel, "py_func", kernel)
    lines = source(func).splitlines()
    lines = lines[next(i for i, line in enumerate(lines) if line.lstrip().startswith("def ")):]  # no decorators
    for old, new, *occurrence in edits:
        hits = [i for i, line in enumerate(lines) if old.strip() in (line.strip(), _code(line))]
        nth = occurrence[0] if occurrence else None
        assert (len(hits) == 1) if nth is None else (len(hits) >= nth >= 1), (
            f"{func.__name__}: the line {old.strip()!r} occurs {len(hits)} times, "
            f"{'not once' if nth is None else f'there is no occurrence {nth}'}: has the kernel changed? "
            "Update the mutant.")
        i = hits[(nth or 1) - 1]
        indent = lines[i][:len(lines[i]) - len(lines[i].lstrip())]
        lines[i:i + 1] = [indent + part if part.strip() else "" for part in textwrap.dedent(new).splitlines()]
    name = name or f"{func.__name__}_mutant"
    lines[0] = lines[0].replace(f"def {func.__name__}(", f"def {name}(", 1)
    namespace = dict(func.__globals__)
    namespace.update(inspect.getclosurevars(func).nonlocals)
    _run("\n".join(lines) + "\n", namespace, f"mutant {name} of {func.__name__}")
    return (jit or cuda.jit)(namespace[name])


__all__ = ["ROOT", "lab_skeletons", "load_solutions", "mutant", "source"]


def judge_only(monkeypatch) -> None:
    """Make ``timed.check`` judge the timings only, for a test whose correctness checks are made elsewhere: a
    faked-GPU test of a measured exercise's verdict, or ``test_labs``' timing of the solutions on a GPU (their
    correctness is checked side by side first; the wrong-code tests check the mutants)."""
    from labhelpers.exercises import timed  # here, not at the top: only the verdict tests patch it

    real = timed.check

    def timing_only(ex, choice, *, correct, race, **where):
        return real(ex, choice, correct=lambda: None, race=race, **where)

    monkeypatch.setattr(timed, "check", timing_only)
