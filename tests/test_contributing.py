"""CONTRIBUTING.md says only what is true of the tree: each statement a test can check is checked here.

* every path it names in backticks exists (a path with a placeholder, ``kernels/<topic>.py`` or ``chNN_*.json``,
  matches at least one file), and the one file it says is not shipped is absent;
* every module and folder of ``src/labhelpers`` has a row in "Where things live" that names it, its folder
  (``roofline/``) or its kind (``kernels/<topic>.py`` covers every chapter topic's kernels);
* every command it gives runs a real file or a module with a command line;
* every ``lh.name`` and ``labhelpers.module.name`` it names exists;
* it stays short: at most about 2,000 words, and "Add a chapter" at most 10 numbered steps.

The rules it states about chapters, notebooks and labs are checked where they apply: ``tests/test_chapters.py``,
``tests/test_book_structure.py``, ``tests/test_labs.py`` and ``tests/test_package_structure.py``.
"""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

import labhelpers

from labhelpers.chapters import TOPICS

pytestmark = pytest.mark.backend_independent  # no kernel, no measurement: CI runs it (see conftest.py)

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "labhelpers"
TEXT = (ROOT / "CONTRIBUTING.md").read_text()
TOPIC_PACKAGES = ("kernels", "experiments", "exercises", "figures")
#: Where a path CONTRIBUTING.md names may be relative to.
BASES = (ROOT, PACKAGE, ROOT / "tests", ROOT / "tools")
#: Files CONTRIBUTING.md names as *not* shipped: they must stay absent until the text changes.
NOT_SHIPPED = ("src/labhelpers/data/cell_times.json",)
PATH_LIKE = re.compile(r"^[\w./<>*-]+$")
SUFFIXES = (".py", ".sh", ".md", ".json", ".yml", ".ipynb", ".toml", ".cfg", ".bib")


def _section(title: str) -> str:
    return TEXT.split(f"## {title}", 1)[1].split("\n## ", 1)[0]


def _named_paths() -> list[str]:
    spans = re.findall(r"`([^`\n]+)`", TEXT)
    return sorted({s for s in spans if PATH_LIKE.match(s) and ("/" in s or s.endswith(SUFFIXES))
                   and not s.startswith(("http", "-"))})


def _exists(path: str) -> bool:
    pattern = re.sub(r"<[^>]+>", "*", path).replace("NN", "*").replace("MM", "*")
    for base in BASES:
        if "*" in pattern:
            if any(base.glob(pattern.rstrip("/"))):
                return True
        elif (base / path).exists():
            return True
    return False


def test_every_path_it_names_exists():
    missing = [p for p in _named_paths() if p not in NOT_SHIPPED and not _exists(p)]
    assert not missing, f"CONTRIBUTING.md names paths that do not exist: {missing}"


@pytest.mark.parametrize("path", NOT_SHIPPED)
def test_what_it_calls_not_shipped_is_absent(path):
    assert path in TEXT and not (ROOT / path).exists(), f"{path} is shipped now: say so in CONTRIBUTING.md"


def _where_things_live() -> str:
    return "\n".join(line for line in _section("Where things live").splitlines() if line.startswith("|"))


def _uncovered_modules(table: str) -> list[str]:
    """The paths under src/labhelpers that the table neither names nor covers by their folder or kind."""
    def named(rel: str) -> bool:
        return re.search(rf"(?<![\w/]){re.escape(rel)}(?![\w])", table) is not None or \
            re.search(rf"/{re.escape(rel)}(?![\w])", table) is not None

    uncovered = []
    for path in sorted(PACKAGE.iterdir()):
        rel = path.name
        if rel.startswith(".") or rel in ("__pycache__", "__init__.py"):
            continue
        if path.is_file() and path.suffix == ".py":
            if not named(rel):
                uncovered.append(f"src/labhelpers/{rel}")
        elif path.is_dir() and rel in TOPIC_PACKAGES + ("models",):
            for module in sorted(path.iterdir()):
                stem = module.stem
                if stem in ("__init__", "__pycache__"):
                    continue
                if (stem in TOPICS and named(f"{rel}/<topic>.py")) or (rel == "models" and named("models/<topic>.py")):
                    continue
                if not named(f"{rel}/{stem}"):
                    uncovered.append(f"src/labhelpers/{rel}/{module.name}")
        elif path.is_dir() and rel == "data":
            for item in sorted(path.iterdir()):
                if item.name.startswith("_") or item.name == "__pycache__":
                    continue
                if not named(f"data/{item.name}"):
                    uncovered.append(f"src/labhelpers/data/{item.name}")
        elif path.is_dir() and rel != "__pycache__" and not named(f"{rel}/"):
            uncovered.append(f"src/labhelpers/{rel}/")
    return uncovered


def test_every_module_has_a_row_in_where_things_live():
    uncovered = _uncovered_modules(_where_things_live())
    assert not uncovered, f"CONTRIBUTING.md's 'Where things live' has no row for {uncovered}"


def test_the_coverage_rule_sees_a_module_without_a_row():
    table = "| kernels | `kernels/<topic>.py` |\n| models | `models/<topic>.py` |"
    uncovered = _uncovered_modules(table)
    assert "src/labhelpers/chapters.py" in uncovered and "src/labhelpers/listings/" in uncovered
    assert not any(p.startswith("src/labhelpers/models/") for p in uncovered)


def _commands() -> list[str]:
    spans = re.findall(r"`((?:python|bash|PYTHONPATH=\S+ [^`]*?python) [^`\n]+)`", TEXT.replace("\n   ", " "))
    return sorted(set(spans))


def test_every_command_runs_a_real_file_or_module():
    assert len(_commands()) >= 8, _commands()
    wrong = []
    for command in _commands():
        words = command.split()
        if "-m" in words:
            module = words[words.index("-m") + 1]
            path = ROOT / "src" / Path(*module.split("."))
            source = path.with_suffix(".py")
            if not (source.is_file() and '__name__ == "__main__"' in source.read_text()):
                wrong.append(command)
            continue
        script = next((w for w in words if w.endswith((".py", ".sh"))), None)
        if script is None or not (ROOT / script).is_file():
            wrong.append(command)
    assert not wrong, f"CONTRIBUTING.md gives commands that run no file of the repository: {wrong}"


def test_it_is_short_and_its_recipe_has_at_most_ten_steps():
    words = len(TEXT.split())
    assert words <= 2100, f"CONTRIBUTING.md has {words} words: move detail into the module or test it concerns"
    steps = re.findall(r"^(\d+)\. ", _section("Add a chapter"), flags=re.MULTILINE)
    assert steps and [int(s) for s in steps] == list(range(1, len(steps) + 1)) and len(steps) <= 10, steps


def test_the_recipe_names_every_part_a_chapter_needs():
    """Each part ``tests/test_chapters.py`` requires is a step of the recipe."""
    recipe = _section("Add a chapter")
    parts = ["src/labhelpers/chapters.py", "_toc.yml", "README.md", "book/intro.md", "kernels/<topic>.py",
             "experiments/<topic>.py", "figures/<topic>.py", "exercises/<topic>.py", "tests/test_<topic>.py",
             "bench/<topic>.py", "chNN_*.json", "book/<slug>.ipynb", "labs/<slug>_lab.ipynb",
             "labs/solutions/<slug>_lab.py", "tests/test_lab_mutants_NN.py", "expected_time(N)", "awaiting=",
             "labhelpers.kernels.<topic>", "test_mutant_counts"]
    missing = [p for p in parts if p not in recipe]
    assert not missing, f"the recipe does not say to add {missing}"


def _resolves(dotted: str) -> bool:
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attr in parts[cut:]:
            if not hasattr(obj, attr):
                return False
            obj = getattr(obj, attr)
        return True
    return False


def test_every_name_it_gives_exists():
    names = set(re.findall(r"\blh\.(\w+)", TEXT))
    missing = [f"lh.{n}" for n in sorted(names) if not hasattr(labhelpers, n)]
    dotted = {m for m in re.findall(r"\b(labhelpers(?:\.\w+)+)", TEXT)}
    missing += [d for d in sorted(dotted) if not _resolves(d)]
    assert names and dotted and not missing, f"CONTRIBUTING.md names what does not exist: {missing}"
