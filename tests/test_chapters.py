"""Every chapter has all its parts under its one pair of names, and every module has a row in CONTRIBUTING.md.

The names come from :mod:`labhelpers.chapters`; the parts are the ones CONTRIBUTING.md's "Where things live"
lists (notebook, lab, solutions, kernels, experiments, exercises, figures, bench, reference data, tests). A module
under ``src/labhelpers`` is covered when that table names it, its folder (``roofline/``) or its kind
(``kernels/<topic>.py`` covers every chapter topic's kernels).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from labhelpers.chapters import CHAPTERS, TOPICS, Chapter, chapter

pytestmark = pytest.mark.backend_independent  # no kernel, no measurement: CI runs it (see conftest.py)

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "labhelpers"
TOPIC_PACKAGES = ("kernels", "experiments", "exercises", "figures")  # one module (or package) per chapter topic
IDS = [c.slug for c in CHAPTERS]
#: Chapters whose reference data is measured on a machine the project has not had yet: the chapter says so and shows
#: its models (remove the entry when the files land; chapter 14's come from tools/device_collect_multi.sh).
AWAITING_REFERENCE = {"14_multi_gpu": "tools/device_collect_multi.sh on a 4-GPU machine"}


def _module_or_package(folder: Path, name: str) -> bool:
    return (folder / f"{name}.py").is_file() or (folder / name / "__init__.py").is_file()


def _missing_parts(c: Chapter) -> list[str]:
    missing = [p for p in (c.notebook, c.lab, c.solutions, f"bench/{c.topic}.py", f"tests/test_{c.topic}.py")
               if not (ROOT / p).is_file()]
    missing += [f"src/labhelpers/{pkg}/{c.topic}.py" for pkg in TOPIC_PACKAGES
                if not _module_or_package(PACKAGE / pkg, c.topic)]
    if not list((PACKAGE / "data" / "reference").glob(f"{c.reference_prefix}*.json")) and \
            c.slug not in AWAITING_REFERENCE:
        missing.append(f"src/labhelpers/data/reference/{c.reference_prefix}*.json")
    return missing


@pytest.mark.parametrize("c", CHAPTERS, ids=IDS)
def test_every_chapter_has_all_its_parts(c):
    assert not _missing_parts(c), f"chapter {c.number} ({c.slug}, topic {c.topic}) lacks {_missing_parts(c)}"


def test_the_table_of_contents_lists_the_chapters_in_order():
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    files = [ch["file"] for part in toc["parts"] for ch in part["chapters"]]
    assert [f for f in files if re.fullmatch(r"book/\d\d_\w+", f)] == [f"book/{c.slug}" for c in CHAPTERS]
    assert [f for f in files if re.fullmatch(r"labs/\d\d_\w+", f)] == [f"labs/{c.slug}_lab" for c in CHAPTERS]


def test_no_notebook_lab_or_topic_module_outside_the_chapter_list():
    slugs = {c.slug for c in CHAPTERS}
    assert {p.stem for p in (ROOT / "book").glob("*.ipynb")} == slugs
    assert {p.stem.removesuffix("_lab") for p in (ROOT / "labs").glob("*.ipynb")} == slugs
    assert {p.stem.removesuffix("_lab") for p in (ROOT / "labs" / "solutions").glob("*.py")} == slugs
    chapter_refdata = {p.name[:5] for p in (PACKAGE / "data" / "reference").glob("ch*.json")}
    awaited = {c.reference_prefix for c in CHAPTERS if c.slug in AWAITING_REFERENCE}
    assert chapter_refdata - awaited == {c.reference_prefix for c in CHAPTERS} - awaited
    assert chapter_refdata <= {c.reference_prefix for c in CHAPTERS}


def test_bench_runs_every_chapter_topic():
    bench = {p.stem for p in (ROOT / "bench").glob("*.py")}
    assert set(TOPICS) <= bench
    assert "TOPICS = [" not in (ROOT / "bench" / "run_all.py").read_text(), "run_all.py reads labhelpers.chapters"


def test_chapter_lookup_by_any_name():
    assert chapter(1) is chapter("01_cuda_in_python") is chapter("cuda_intro")
    with pytest.raises(KeyError, match="cuda_intro"):
        chapter("intro")


def _where_things_live() -> str:
    text = (ROOT / "CONTRIBUTING.md").read_text()
    section = text.split("## Where things live", 1)[1].split("\n## ", 1)[0]
    return "\n".join(line for line in section.splitlines() if line.startswith("|"))


def _uncovered_modules(table: str) -> list[str]:
    """The paths under src/labhelpers that the table neither names nor covers by their folder or kind."""
    def named(rel: str) -> bool:
        return re.search(rf"(?<![\w/]){re.escape(rel)}(?![\w])", table) is not None or \
            re.search(rf"/{re.escape(rel)}(?![\w])", table) is not None

    uncovered = []
    for path in sorted(PACKAGE.iterdir()):
        rel = path.name
        if rel.startswith(("_", ".")) or rel == "__pycache__":
            continue
        if path.is_file() and path.suffix == ".py":
            if not named(rel):
                uncovered.append(f"src/labhelpers/{rel}")
        elif path.is_dir() and rel in TOPIC_PACKAGES + ("models",):
            for module in sorted(path.glob("*.py")):
                stem = module.stem
                if stem == "__init__" or (stem in TOPICS and named(f"{rel}/<topic>.py")):
                    continue
                if rel == "models" and named("models/<topic>.py"):
                    continue
                if not named(f"{rel}/{stem}"):
                    uncovered.append(f"src/labhelpers/{rel}/{module.name}")
        elif path.is_dir() and rel == "data":
            for item in sorted(path.iterdir()):
                if item.name.startswith("_") or item.name == "__pycache__":
                    continue
                if not named(f"data/{item.name}"):
                    uncovered.append(f"src/labhelpers/data/{item.name}")
        elif path.is_dir() and not named(f"{rel}/"):
            uncovered.append(f"src/labhelpers/{rel}/")
    return uncovered


def test_every_module_has_a_row_in_where_things_live():
    uncovered = _uncovered_modules(_where_things_live())
    assert not uncovered, f"CONTRIBUTING.md's 'Where things live' has no row for {uncovered}"


def test_scripts_take_their_chapter_lists_from_the_chapter_table():
    """A new chapter is collected and compile-checked without editing a script: none keeps its own list."""
    from labhelpers.chapters import CHAPTERS, main, names

    collect = (ROOT / "tools" / "device_collect.sh").read_text()
    assert "python3 -m labhelpers.chapters topic --max-gpus 1" in collect
    assert not any(f" {c.topic} " in collect for c in CHAPTERS if c.topic not in ("scan", "memory")), \
        "tools/device_collect.sh names a topic: read the list from labhelpers.chapters"
    launches = (ROOT / "tools" / "record_launches.py").read_text()
    assert "tests/test_cuda_intro.py" not in launches and "_topics()" in launches
    assert names("topic", max_gpus=1) == [c.topic for c in CHAPTERS if c.gpus == 1]
    assert names("number")[0] == "1" and len(names("slug")) == len(CHAPTERS)
    assert main(["slug", "--max-gpus", "1"]) == 0
