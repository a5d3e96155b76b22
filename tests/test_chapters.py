"""Every chapter has all its parts under its one pair of names, and every list of chapters agrees with chapters.py.

The names come from :mod:`labhelpers.chapters`; the parts are the ones CONTRIBUTING.md's "Add a chapter" recipe
lists (notebook, lab, solutions, kernels, experiments, exercises, figures, bench, reference data, tests, mutants).
A test that fails names the chapter and the missing part. The places that keep a list of chapters of their own
(``_toc.yml``, README.md, ``book/intro.md``'s "What is inside") are compared with :data:`CHAPTERS` here; scripts
read the table (``python -m labhelpers.chapters``).

Rules of a chapter notebook checked here: a markdown cell names where its code lives
(``labhelpers.kernels.<topic>`` or ``labhelpers.experiments.<topic>``), and a code cell prints
``expected_time(N)`` with its own number. A note that data is "not yet shipped" or "not measured yet" is declared
in ``Chapter.awaiting``, the one place.

Mutants: each lab's checkers are proved in ``tests/test_lab_mutants_NN_MM.py`` (a range of consecutive labs) or
``tests/test_lab_mutants_NN.py`` (one lab); each such file has a ``test_mutant_counts`` comparing with a literal
``{"lab number": count}`` for exactly the labs its name covers. Files of one kind of exercise across labs
(``_bugs``, ``_measured``) and ``test_lab_predictions.py`` are extra.
"""

from __future__ import annotations

import ast
import json
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
#: What a notebook prints where reference data waits for a machine (declared in ``Chapter.awaiting``).
AWAITING_NOTES = re.compile(r"not yet shipped|not measured yet|not yet measured|not yet collected", re.IGNORECASE)


def _module_or_package(folder: Path, name: str) -> bool:
    return (folder / f"{name}.py").is_file() or (folder / name / "__init__.py").is_file()


def _missing_parts(c: Chapter) -> list[str]:
    missing = [p for p in (c.notebook, c.lab, c.solutions, f"bench/{c.topic}.py", f"tests/test_{c.topic}.py")
               if not (ROOT / p).is_file()]
    missing += [f"src/labhelpers/{pkg}/{c.topic}.py" for pkg in TOPIC_PACKAGES
                if not _module_or_package(PACKAGE / pkg, c.topic)]
    if not list((PACKAGE / "data" / "reference").glob(f"{c.reference_prefix}*.json")) and not c.awaiting:
        missing.append(f"src/labhelpers/data/reference/{c.reference_prefix}*.json")
    return missing


@pytest.mark.parametrize("c", CHAPTERS, ids=IDS)
def test_every_chapter_has_all_its_parts(c):
    assert not _missing_parts(c), f"chapter {c.number} ({c.slug}, topic {c.topic}) lacks {_missing_parts(c)}"


def test_the_table_of_contents_lists_the_chapters_in_order():
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    files = [ch["file"] for part in toc["parts"] for ch in part["chapters"]]
    missing = [f for c in CHAPTERS for f in (f"book/{c.slug}", f"labs/{c.slug}_lab") if f not in files]
    assert not missing, f"_toc.yml lacks {missing}"
    assert [f for f in files if re.fullmatch(r"book/\d\d_\w+", f)] == [f"book/{c.slug}" for c in CHAPTERS]
    assert [f for f in files if re.fullmatch(r"labs/\d\d_\w+", f)] == [f"labs/{c.slug}_lab" for c in CHAPTERS]


def test_no_notebook_lab_or_topic_module_outside_the_chapter_list():
    slugs = {c.slug for c in CHAPTERS}
    found = {p.stem for p in (ROOT / "book").glob("*.ipynb")}
    assert found == slugs, f"notebooks without a chapter row: {sorted(found - slugs)}; rows without a notebook: " \
                           f"{sorted(slugs - found)}"
    assert {p.stem.removesuffix("_lab") for p in (ROOT / "labs").glob("*.ipynb")} == slugs
    assert {p.stem.removesuffix("_lab") for p in (ROOT / "labs" / "solutions").glob("*.py")} == slugs
    chapter_refdata = {p.name[:5] for p in (PACKAGE / "data" / "reference").glob("ch*.json")}
    awaited = {c.reference_prefix for c in CHAPTERS if c.awaiting}
    assert chapter_refdata - awaited == {c.reference_prefix for c in CHAPTERS} - awaited
    assert chapter_refdata <= {c.reference_prefix for c in CHAPTERS}


def test_bench_runs_every_chapter_topic():
    bench = {p.stem for p in (ROOT / "bench").glob("*.py")}
    assert set(TOPICS) <= bench, f"no bench for {[f'bench/{t}.py' for t in TOPICS if t not in bench]}"
    assert "TOPICS = [" not in (ROOT / "bench" / "run_all.py").read_text(), "run_all.py reads labhelpers.chapters"


def test_chapter_lookup_by_any_name():
    assert chapter(1) is chapter("01_cuda_in_python") is chapter("cuda_intro")
    with pytest.raises(KeyError, match="cuda_intro"):
        chapter("intro")


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
    collect_multi = (ROOT / "tools" / "device_collect_multi.sh").read_text()
    assert "python3 -m labhelpers.chapters topic --min-gpus 2" in collect_multi
    assert "--only multi_gpu" not in collect_multi, "tools/device_collect_multi.sh reads its topics from the table"
    assert names("topic", min_gpus=2) == [c.topic for c in CHAPTERS if c.gpus >= 2]


def _numbers_in(text: str) -> list[int]:
    """The chapter numbers a list writes as ``N. words``."""
    return [int(n) for n in re.findall(r"(?<![\w.])(\d{1,2})\. [A-Za-z]", text)]


def _readme_list() -> str:
    text = (ROOT / "README.md").read_text()
    return text.split("Chapters (", 1)[1].split("\n\n", 1)[0]


def _intro_list() -> str:
    section = (ROOT / "book" / "intro.md").read_text().split("## What is inside", 1)[1].split("\n## ", 1)[0]
    return "\n".join(line for line in section.splitlines() if line.startswith("|"))


@pytest.mark.parametrize("where, listed", [("README.md's 'Chapters (...)' paragraph", _readme_list),
                                           ("book/intro.md's 'What is inside' table", _intro_list)])
def test_the_chapter_lists_in_prose_name_every_chapter_in_order(where, listed):
    numbers = _numbers_in(listed())
    missing = [f"{c.number} ({c.slug})" for c in CHAPTERS if c.number not in numbers]
    assert not missing, f"{where} lacks chapter {', '.join(missing)}: add it as 'N. title'"
    assert numbers == [c.number for c in CHAPTERS], f"{where} lists chapters {numbers}: one each, in order"


def test_the_chapter_docstring_counts_from_the_table():
    from labhelpers import chapters

    assert not re.search(r"1 to 1\d", chapters.__doc__ + (Chapter.__doc__ or "")), "say len(CHAPTERS), not a number"


def _notebook_text(path: Path, *, outputs: bool = True) -> list[tuple[str, str]]:
    """(cell type, text) of every cell: its source and, for code cells, its text outputs."""
    if not path.is_file():
        pytest.fail(f"{path.relative_to(ROOT)} does not exist (a part of its chapter)")
    cells = []
    for cell in json.loads(path.read_text())["cells"]:
        text = "".join(cell["source"])
        if outputs:
            for out in cell.get("outputs", []):
                text += "\n" + "".join(out.get("text", "")) + "".join(out.get("data", {}).get("text/plain", ""))
        cells.append((cell["cell_type"], text))
    return cells


@pytest.mark.parametrize("c", CHAPTERS, ids=IDS)
def test_every_chapter_says_where_its_code_lives(c):
    module = re.compile(rf"labhelpers\.(kernels|experiments)\.{c.topic}\b")
    cells = _notebook_text(ROOT / c.notebook, outputs=False)
    assert any(kind == "markdown" and module.search(text) for kind, text in cells), (
        f"chapter {c.number} ({c.notebook}) has no markdown cell saying where its code lives: name "
        f"`labhelpers.kernels.{c.topic}` (and the experiments, models and figures it uses)")


@pytest.mark.parametrize("c", CHAPTERS, ids=IDS)
def test_every_chapter_prints_its_expected_time(c):
    cells = _notebook_text(ROOT / c.notebook, outputs=False)
    call = re.compile(rf"expected_time\({c.number}\)")
    assert any(kind == "code" and call.search(text) and text.startswith("# machine-dependent output")
               for kind, text in cells), (
        f"chapter {c.number} ({c.notebook}) lacks the cell printing runtime_estimate.expected_time({c.number}) "
        "(a machine-dependent cell after its imports, tagged nbval-ignore-output)")


@pytest.mark.parametrize("c", CHAPTERS, ids=IDS)
def test_a_note_that_data_is_awaited_is_declared_in_the_chapter_table(c):
    noted = [path for path in (c.notebook, c.lab) if any(AWAITING_NOTES.search(text)
                                                         for _kind, text in _notebook_text(ROOT / path))]
    if noted:
        assert c.awaiting, (f"{', '.join(noted)} say(s) data is not yet measured or shipped: declare what it waits "
                            f"for in chapter {c.number}'s `awaiting` (src/labhelpers/chapters.py)")
    if c.awaiting:
        assert noted, (f"chapter {c.number} declares `awaiting` but its notebook says nothing is missing: the data "
                       "has landed, remove the declaration")


def _mutant_files() -> dict[Path, list[int]]:
    """Each tests/test_lab_mutants_NN[_MM].py and the labs its name covers."""
    files = {}
    for path in sorted((ROOT / "tests").glob("test_lab_mutants*.py")):
        m = re.fullmatch(r"test_lab_mutants_(\d\d)(?:_(\d\d))?", path.stem)
        if m:
            first = int(m.group(1))
            files[path] = list(range(first, int(m.group(2) or first) + 1))
    return files


def _counted_labs(path: Path) -> list[str] | None:
    """The keys of the literal dict ``test_mutant_counts`` compares with, or None without one."""
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.FunctionDef) and node.name == "test_mutant_counts":
            for compare in ast.walk(node):
                if isinstance(compare, ast.Compare) and isinstance(compare.comparators[-1], ast.Dict):
                    return [k.value for k in compare.comparators[-1].keys if isinstance(k, ast.Constant)]
    return None


def test_mutant_files_are_grouped_by_lab_and_count_their_mutants_one_way():
    stray = [p.name for p in (ROOT / "tests").glob("test_lab_mutants*.py")
             if p not in _mutant_files() and p.stem.removeprefix("test_lab_mutants_") not in ("bugs", "measured")]
    assert not stray, f"{stray}: name a mutant file by its labs (test_lab_mutants_NN_MM.py or _NN.py)"
    for path, labs in _mutant_files().items():
        counted = _counted_labs(path)
        assert counted is not None, f"{path.name}: test_mutant_counts must compare with a literal {{lab: count}} dict"
        assert sorted(counted, key=int) == [str(n) for n in labs], f"{path.name} counts labs {counted}, not {labs}"


@pytest.mark.parametrize("c", CHAPTERS, ids=IDS)
def test_every_lab_has_mutants(c):
    files = [p.name for p, labs in _mutant_files().items() if c.number in labs]
    assert len(files) == 1, (f"lab {c.number} ({c.lab}) has mutants in {files or 'no file'}: add "
                             f"tests/test_lab_mutants_{c.number:02d}.py with its mutants and test_mutant_counts")
