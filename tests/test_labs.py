"""Every lab skeleton has a solution that only adds lines, and the lab's checker passes that solution.

A cell tagged ``skeleton`` defines one or more functions (kernels); the solutions file
``labs/solutions/<lab>.py`` defines the same names. Solving an exercise may only add lines:
every non-placeholder line of the skeleton must appear, in order, in the solution. The
lab's check cell calls a checker on the skeleton's function; here the same call is made
on the solution and must pass (and the committed notebook records that it fails on the
skeleton, which nbval keeps checking). On a GPU the cells that time (tagged
``nbval-ignore-output``) run in a test of their own, which the GPU suite runs alone on the GPU:
a measured exercise's check raises below its target, so that test is also the one test that each
lab's solution reaches its targets on the GPU in hand.
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
from labhelpers.exercises import timed
from markers import SIM, gpu_only
from mutants import judge_only

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


def _code_cells(lab: Path) -> list[tuple[str, str]]:
    """The lab's code cells as the tests below run them: (source without magics, role). Roles: "skeleton", "pitfall"
    (an error shown on purpose), "timed check" (a machine-dependent cell, tagged ``nbval-ignore-output``, that calls
    a checker: a measured exercise), "measured" (another machine-dependent cell, or one that reads a name only such a
    cell sets: on a GPU these time), "check" (calls a checker), "plain" (the rest)."""
    cells, measured_names = [], set()
    for cell in nbformat.read(lab, as_version=4).cells:
        if cell.cell_type != "code" or cell.source.lstrip().startswith("# Setup"):
            continue
        tags = cell.metadata.get("tags", [])
        source = "\n".join(line for line in cell.source.splitlines() if not line.lstrip().startswith(("%", "!")))
        stores, loads = _names(source)
        if "skeleton" in tags or "pitfall" in tags:
            role = "skeleton" if "skeleton" in tags else "pitfall"
        elif "nbval-ignore-output" in tags or loads & measured_names:
            timed_check = "nbval-ignore-output" in tags and not loads & measured_names and _calls(source, "check")
            role = "timed check" if timed_check else "measured"
            measured_names |= stores
        else:
            role = "check" if _calls(source, "check") else "plain"
            measured_names -= stores
        cells.append((source, role))
    return cells


def _names(source: str) -> tuple[set[str], set[str]]:
    """The names a cell sets (assignments, definitions, imports) and the names it reads."""
    stores, loads = set(), set()
    for n in ast.walk(ast.parse(source)):
        if isinstance(n, ast.Name):
            (stores if isinstance(n.ctx, ast.Store) else loads).add(n.id)
        elif isinstance(n, (ast.FunctionDef, ast.ClassDef)):
            stores.add(n.name)
        elif isinstance(n, (ast.Import, ast.ImportFrom)):
            stores |= {(a.asname or a.name).split(".")[0] for a in n.names}
    return stores, loads


def _cells_the_measured_ones_need(cells: list[tuple[str, str]]) -> set[int]:
    """The measured cells and the plain cells before them that set a name they (or such a cell) read."""
    needed: set[int] = set()
    wanted: set[str] = set()
    for i in reversed(range(len(cells))):
        source, role = cells[i]
        stores, loads = _names(source)
        if role in ("measured", "timed check") or (role == "plain" and stores & wanted):
            needed.add(i)
            wanted |= loads
    return needed


def _run_cells(lab: Path, roles: set[str], only: set[int] | None = None,
               said: tuple[str, ...] = ("Correct", "GPU only")) -> None:
    """Run the lab's cells of these roles in order (of those numbered ``only``, if given), the skeleton names bound
    to the solutions; each that calls a checker must say one of ``said``, each that shows a prediction beside a
    measurement must show one."""
    module, _ = _load_solutions(lab)
    names = {name for name, _ in _skeletons(lab)}
    namespace: dict = {}
    for number, (source, role) in enumerate(_code_cells(lab)):
        if role == "skeleton":
            namespace.update({n: getattr(module, n) for n in names if hasattr(module, n)})
        if role not in roles or (only is not None and number not in only):
            continue
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            shown = _exec_cell(source, f"{lab.name}:cell", namespace)
        namespace.update({n: getattr(module, n) for n in names if hasattr(module, n)})
        out = printed.getvalue()
        if _calls(source, "check"):
            assert any(word in out for word in said), (
                f"{lab.name}: a check cell ran on the solution without saying any of {said}:\n"
                f"{source}\n--- it printed:\n{out}")
        if SIM and role == "timed check":  # a measured exercise: the reference GPU's numbers, and what a GPU does
            assert "Reference: " in out and "On a GPU this check times" in out and (
                "reference data '" in out or "no 2-GPU measurement is shipped" in out), (
                f"{lab.name}: a measured check under the simulator did not show the reference data:\n{out}")
        if _calls(source, "show_", but="show_source"):
            text = out + ("" if shown is None else getattr(shown, "to_string", lambda: repr(shown))())
            assert "Correct" in text and "easured" in text, (
                f"{lab.name}: a prediction was not shown beside a measurement:\n{source}\n--- it showed:\n{text}")


def _exec_cell(source: str, filename: str, namespace: dict):
    """Run a cell as a notebook does; the value of its last line when that is an expression (what it displays)."""
    tree = ast.parse(source)
    last = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) else None
    exec(compile(tree, filename, "exec"), namespace)  # noqa: S102  (the lab's own cells)
    if last is None:
        return None
    return eval(compile(ast.Expression(last.value), filename, "eval"), namespace)  # noqa: S307


@pytest.mark.parametrize("lab", LABS, ids=[p.name for p in LABS])
def test_check_cells_pass_on_the_solutions(lab: Path, monkeypatch):
    """Re-run the lab's cells with the skeleton names bound to the solutions: each check says "Correct" (or "GPU
    only", for a kernel the simulator cannot run). The one test that every lab's solutions pass their checkers (the
    mutant files test only rejections: a checker that rejects everything fails here). On a GPU the timing is left to
    the next test, which the GPU suite runs alone on the GPU: a measured exercise's correctness is checked here, side
    by side with other tests, and the other machine-dependent cells run there."""
    roles = {"plain", "check", "timed check"} | ({"measured"} if SIM else set())
    if not SIM:
        def correctness_only(ex, choice, *, correct, race, **where):
            correct()
            return timed.Verdict(passed=True, ratio=None, text="timed by test_measured_cells_pass_on_the_solutions")

        monkeypatch.setattr(timed, "check", correctness_only)
    _run_cells(lab, roles)
    checks = sum(1 for source, role in _code_cells(lab) if role != "plain" and _calls(source, "check"))
    assert checks >= 3, f"{lab.name}: {checks} check cells (a lab has at least three exercises)"


@gpu_only
@pytest.mark.measures
@pytest.mark.parametrize("lab", LABS, ids=[p.name for p in LABS])
def test_measured_cells_pass_on_the_solutions(lab: Path, monkeypatch):
    """On a GPU, the lab's machine-dependent cells on the solutions (after the plain cells they follow): a measured
    exercise passes its target on this GPU (its check raises below it), a prediction is shown beside this GPU's
    measurement. Only the plain cells they need run first, and a measured exercise's correctness is not checked again:
    the test above did both. Under the simulator that test runs these cells."""
    judge_only(monkeypatch)
    _run_cells(lab, {"plain", "measured", "timed check"}, _cells_the_measured_ones_need(_code_cells(lab)),
               said=("Passed", "Not timed here"))


def _calls(source: str, prefix: str, but: str = "") -> bool:
    """Whether a cell calls a function whose name starts with ``prefix`` (``ex.check_...(...)``, ``check_...(...)``),
    other than ``but``."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call):
            name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            if name.startswith(prefix) and name != (but or None):
                return True
    return False


