"""Every lab skeleton has a solution that only adds lines, and the lab's checker passes that solution.

A cell tagged ``skeleton`` defines one or more functions (kernels); the solutions file
``labs/solutions/<lab>.py`` defines the same names. Solving an exercise may only add lines:
every non-placeholder line of the skeleton must appear, in order, in the solution. The
lab's check cell calls a checker on the skeleton's function; here the same call is made
on the solution and must pass (and the committed notebook records that it fails on the
skeleton, which nbval keeps checking).
"""

from __future__ import annotations

import ast
import contextlib
import importlib.util
import io
import re
from pathlib import Path

import nbformat
import pytest

import labhelpers as lh  # noqa: F401  (chooses the backend before the solutions import numba.cuda)

ROOT = Path(__file__).resolve().parents[1]
LABS = sorted((ROOT / "labs").glob("*.ipynb"))
PLACEHOLDER = re.compile(r"FILL ME IN|^\s*pass\s*(#.*)?$|NotImplementedError")


def _load_solutions(lab: Path):
    path = ROOT / "labs" / "solutions" / f"{lab.stem}.py"
    assert path.exists(), f"{lab.name} has no solutions file {path.relative_to(ROOT)}"
    spec = importlib.util.spec_from_file_location(f"solutions_{lab.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module, path.read_text()


def _functions(source: str) -> dict[str, str]:
    tree = ast.parse(source)
    lines = source.splitlines()
    out = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            start = min([d.lineno for d in node.decorator_list] + [node.lineno])
            out[node.name] = "\n".join(lines[start - 1:node.end_lineno])
    return out


def _skeletons(lab: Path) -> list[tuple[str, str]]:
    nb = nbformat.read(lab, as_version=4)
    found = []
    for cell in nb.cells:
        if cell.cell_type == "code" and "skeleton" in cell.metadata.get("tags", []):
            src = "\n".join(line for line in cell.source.splitlines() if not line.lstrip().startswith("%"))
            found += list(_functions(src).items())
    return found


def _is_subsequence(needles: list[str], haystack: list[str]) -> bool:
    it = iter(haystack)
    return all(any(n == h for h in it) for n in needles)


def _significant(source: str) -> list[str]:
    return [line.rstrip() for line in source.splitlines() if line.strip() and not PLACEHOLDER.search(line)]


def test_labs_exist():
    assert LABS, "no lab notebooks in labs/"


@pytest.mark.parametrize("lab", LABS, ids=[p.name for p in LABS])
def test_lab_has_at_least_three_exercises(lab: Path):
    assert len(_skeletons(lab)) + _count_other_exercises(lab) >= 3, f"{lab.name}: fewer than three exercises"


def _count_other_exercises(lab: Path) -> int:
    """Exercises without a kernel skeleton (numeric answers) are cells tagged ``exercise``."""
    nb = nbformat.read(lab, as_version=4)
    return sum(1 for c in nb.cells if "exercise" in c.metadata.get("tags", []))


@pytest.mark.parametrize("lab", LABS, ids=[p.name for p in LABS])
def test_solutions_only_add_lines_to_the_skeletons(lab: Path):
    _module, solution_source = _load_solutions(lab)
    solutions = _functions(solution_source)
    for name, skeleton in _skeletons(lab):
        assert name in solutions, f"{lab.name}: no solution for skeleton {name!r}"
        kept = _significant(skeleton)
        assert _is_subsequence(kept, [line.rstrip() for line in solutions[name].splitlines()]), (
            f"{lab.name}: the solution of {name!r} changes skeleton lines instead of only adding lines")


@pytest.mark.parametrize("lab", LABS, ids=[p.name for p in LABS])
def test_check_cells_pass_on_the_solutions(lab: Path):
    """Re-run each check cell with the skeleton names bound to the solutions: each says "Correct" (or "GPU only",
    for a kernel the simulator cannot run). The one test that every lab's solutions pass their checkers (the mutant
    files test only rejections: a checker that rejects everything fails here)."""
    module, _ = _load_solutions(lab)
    nb = nbformat.read(lab, as_version=4)
    names = {name for name, _ in _skeletons(lab)}
    namespace: dict = {}
    checks = 0
    for cell in nb.cells:
        if cell.cell_type != "code" or cell.source.lstrip().startswith("# Setup"):
            continue
        tags = cell.metadata.get("tags", [])
        source = "\n".join(line for line in cell.source.splitlines() if not line.lstrip().startswith(("%", "!")))
        if "skeleton" in tags:
            namespace.update({n: getattr(module, n) for n in names if hasattr(module, n)})
            continue
        if "pitfall" in tags:
            continue  # an error shown on purpose, not an exercise check
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            exec(compile(source, f"{lab.name}:cell", "exec"), namespace)
        namespace.update({n: getattr(module, n) for n in names if hasattr(module, n)})
        if _calls_a_checker(source):
            checks += 1
            out = printed.getvalue()
            assert "Correct" in out or "GPU only" in out, (
                f"{lab.name}: a check cell ran on the solution without saying 'Correct' (or 'GPU only'):\n"
                f"{source}\n--- it printed:\n{out}")
    assert checks >= 3, f"{lab.name}: {checks} check cells (a lab has at least three exercises)"


def _calls_a_checker(source: str) -> bool:
    """Whether a cell calls a lab checker (``ex.check_...(...)``, ``check_...(...)``)."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call):
            name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            if name.startswith("check"):
                return True
    return False
