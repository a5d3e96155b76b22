"""The package's structure: every module imports, no import cycle anywhere, imports at the top of the modules.

The import graph is read from the source with ``ast``: an edge ``A -> B`` for every ``import`` of a labhelpers
module ``B`` in module ``A`` (at the top or inside a function: a function-level import closes a cycle as
surely, only later), plus the packages Python initialises on the way to ``B`` (``labhelpers.roofline`` for
``labhelpers.roofline.model``) unless ``A`` is inside them already.
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import labhelpers  # noqa: F401  (first: chooses the simulator before numba.cuda is imported)
import pytest

pytestmark = pytest.mark.backend_independent  # no kernel, no measurement: CI runs it (see conftest.py)

SRC = Path(__file__).resolve().parents[1] / "src"
PACKAGE = SRC / "labhelpers"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _is_package(name: str) -> bool:
    return MODULES.get(name, Path()).name == "__init__.py"


def _resolve(importer: str, level: int, module: str | None) -> str:
    """The absolute name of ``from <level dots><module> import ...`` written in module ``importer``."""
    if level == 0:
        return module or ""
    base = importer.split(".") if _is_package(importer) else importer.split(".")[:-1]
    base = base[: len(base) - (level - 1)]
    return ".".join(base + ([module] if module else []))


def imported_modules(name: str, path: Path) -> set[str]:
    """The labhelpers modules that module ``name`` imports, anywhere in its source."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = _resolve(name, node.level, node.module)
            # "from pkg import sub" imports the module pkg.sub when there is one, else a name of pkg
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base for a in node.names]
        else:
            continue
        for target in targets:
            while target and target not in MODULES:  # "import labhelpers.x.y" of a name: its module
                target = target.rpartition(".")[0]
            if target and target.split(".")[0] == "labhelpers":
                found.add(target)
    return found


def import_graph() -> dict[str, set[str]]:
    """Module -> the labhelpers modules its import runs (explicit imports, and the packages on their way)."""
    graph = {}
    for name, path in MODULES.items():
        edges = set()
        for target in imported_modules(name, path):
            parts = target.split(".")
            for i in range(1, len(parts) + 1):
                step = ".".join(parts[:i])
                if step in MODULES and not (name == step or name.startswith(step + ".")):
                    edges.add(step)
        edges.discard(name)
        graph[name] = edges
    return graph


def find_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every strongly connected component of more than one module (Tarjan), each as a sorted list."""
    index, low, on_stack, stack, cycles = {}, {}, set(), [], []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return cycles


def test_the_graph_reader_finds_cycles_and_resolves_relative_imports():
    assert find_cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert find_cycles({"a": {"b"}, "b": set()}) == []
    assert _resolve("labhelpers.roofline.points", 2, "measured") == "labhelpers.measured"
    assert _resolve("labhelpers.roofline", 1, "model") == "labhelpers.roofline.model"  # a package's own "."
    graph = import_graph()
    assert "labhelpers.roofline.model" in graph["labhelpers.roofline.points"]
    assert "labhelpers.roofline" in graph["labhelpers.experiments.roofline"]  # the package runs on the way


def test_the_package_has_no_import_cycle():
    cycles = find_cycles(import_graph())
    assert not cycles, "import cycles (each line: modules that import one another in a loop):\n" + "\n".join(
        " <-> ".join(c) for c in cycles)


@pytest.mark.parametrize("name", sorted(MODULES))
def test_every_module_imports(name):
    importlib.import_module(name)


#: Modules whose imports are all at the top, but for the lazy imports the backend requires (each with a
#: comment saying why on the line before): the roofline's, and chapter 7's.
TOP_IMPORTS_ONLY = sorted(n for n in MODULES if n.startswith("labhelpers.roofline") or
                          n in ("labhelpers.kernels.roofline", "labhelpers.experiments.roofline",
                                "labhelpers.exercises.roofline"))
#: What may be imported inside a function there: GPU-only or optional packages.
LAZY_ALLOWED = ("cupy", "llvmlite", "numba")
#: What is never imported inside a function anywhere (but in backend.py, which runs before the backend is chosen):
#: always installed, cheap once numba.cuda is loaded, and what every reader expects at the top.
NEVER_LAZY = ("numpy", "pandas", "matplotlib", "json", "importlib", "numba.cuda")


def _function_imports(path: Path):
    """(line number, imported module names, the reason written beside or before it) of every import in a function."""
    lines = path.read_text().splitlines()
    tree = ast.parse(path.read_text())
    seen = set()
    for func in (n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))):
        for node in ast.walk(func):
            if not isinstance(node, (ast.Import, ast.ImportFrom)) or node.lineno in seen:
                continue
            seen.add(node.lineno)
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif node.level:
                names = ["labhelpers"]
            else:
                names = [node.module or ""] + [f"{node.module}.{a.name}" for a in node.names]
            before = lines[node.lineno - 2].strip()
            reason = lines[node.lineno - 1].partition("#")[2] or (before.lstrip("#") if before.startswith("#") else "")
            yield node, names, reason.strip()


@pytest.mark.parametrize("name", TOP_IMPORTS_ONLY)
def test_imports_are_at_the_top_unless_the_backend_requires_otherwise(name):
    path = MODULES[name]
    for node, names, reason in _function_imports(path):
        where = f"{path.name}:{node.lineno}"
        assert node.__class__ is ast.Import or node.level == 0, f"{where}: a labhelpers import inside a function"
        assert all(n.split(".")[0] in LAZY_ALLOWED for n in names[:1]), f"{where}: {names[0]} belongs at the top"
        assert reason, f"{where}: a lazy import needs a one-line reason (a comment) beside or before it"


@pytest.mark.parametrize("name", sorted(MODULES))
def test_every_import_inside_a_function_says_why(name):
    # Everything at the top, the one dialect: an import inside a function is for an optional or backend-only
    # package (CuPy, the driver's bindings, the simulator's internals, SciPy's slow import) or a line number that
    # stored output quotes, and it says so beside it.
    path = MODULES[name]
    for node, names, reason in _function_imports(path):
        where = f"{path.relative_to(SRC)}:{node.lineno}"
        assert reason, f"{where}: an import inside a function needs a one-line reason (a comment) beside it"
        if name != "labhelpers.backend" and names != ["labhelpers"]:  # a package module: to break a cycle
            imported = names if node.__class__ is ast.Import else names[1:]
            plain = [n for n in imported if n in NEVER_LAZY or n.split(".")[0] in ("numpy", "pandas", "json")]
            assert not plain or "line number" in reason, f"{where}: {plain} belongs at the top of the module"


def test_the_rule_sees_a_lazy_import_without_a_reason(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("def f():\n    import numpy as np\n    from numba import cuda  # needed\n    return np\n")
    found = [(names[0], reason) for _node, names, reason in _function_imports(bad)]
    assert found == [("numpy", ""), ("numba", "needed")]


def test_no_script_edits_sys_path():
    # bench/ and tools/ scripts run with the package installed (or PYTHONPATH=src), and tests import tools through
    # pytest's `pythonpath` (pyproject.toml): a sys.path edit would hide a missing install behind a second copy.
    root = SRC.parent
    offenders = [f"{p.relative_to(root)}:{i}" for folder in ("src", "bench", "tools")
                 for p in sorted((root / folder).rglob("*.py"))
                 for i, line in enumerate(p.read_text().splitlines(), 1) if "sys.path.insert" in line]
    assert not offenders, f"sys.path edited in {offenders}: install the package, or use pytest's pythonpath"


def test_no_module_passes_1200_lines():
    # A module that long does several jobs: split it along its sections (as kernels/scan/ and kernels/stencil_labelling.py).
    long = {name: n for name, path in MODULES.items() if (n := len(path.read_text().splitlines())) > 1200}
    assert not long, f"modules over 1,200 lines: {long}"


def _imports_matplotlib(path: Path) -> bool:
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        names = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                 [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
        if any(n == "matplotlib" or n.startswith("matplotlib.") for n in names):
            return True
    return False


def drawing_modules() -> list[Path]:
    """Every module that draws: ``figures/*``, ``roofline/*`` and any other module that imports matplotlib."""
    found = {p for folder in ("figures", "roofline") for p in (PACKAGE / folder).glob("*.py")}
    found |= {p for p in MODULES.values() if _imports_matplotlib(p)}
    return sorted(p for p in found if p.name != "__init__.py")


def _returns_a_value(fn: ast.FunctionDef) -> bool:
    """Whether ``fn`` itself (not a function nested in it) returns something other than None."""
    stack = list(fn.body)
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            continue
        if isinstance(node, ast.Return) and node.value is not None and not (
                isinstance(node.value, ast.Constant) and node.value.value is None):
            return True
        stack.extend(ast.iter_child_nodes(node))
    return False


def _makes_panels(fn: ast.FunctionDef) -> bool:
    """Whether ``fn`` makes a figure of several axes (``plotting.figure_panels``, or ``plt.subplots`` with rows or
    columns)."""
    def name(call: ast.Call) -> str | None:
        return getattr(call.func, "attr", getattr(call.func, "id", None))

    return any(isinstance(n, ast.Call) and (name(n) == "figure_panels" or name(n) == "subplots" and (
        n.args or any(k.arg in ("nrows", "ncols") for k in n.keywords))) for n in ast.walk(fn))


def figure_signature_problems(path: Path) -> list[str]:
    """The public drawing functions of ``path`` off the book's two signatures (CONTRIBUTING.md, "figures"):
    ``plot_x(data..., *, ax=None, label=...) -> Figure`` (``axes=None`` for a figure of several panels: a row of
    axes) and ``draw_x(ax, **params) -> None``."""
    problems = []
    for node in ast.parse(path.read_text(), filename=str(path)).body:
        if not isinstance(node, ast.FunctionDef) or node.name.startswith("_"):
            continue
        positional = [a.arg for a in node.args.posonlyargs + node.args.args]
        keywords = dict(zip((a.arg for a in node.args.kwonlyargs), node.args.kw_defaults))
        first = positional[0] if positional else None
        returns = ast.unparse(node.returns) if node.returns else None
        module = path.relative_to(PACKAGE).with_suffix("") if path.is_relative_to(PACKAGE) else Path(path.stem)
        where = f"{module.as_posix().replace('/', '.')}.{node.name}"
        if node.name.startswith("plot_"):
            wanted = "axes" if _makes_panels(node) else "ax"
            if first in ("ax", "axes"):
                problems.append(f"{where}: a plot_ takes its data first and ax=None as a keyword (a drawer is draw_)")
            elif [a for a in ("ax", "axes", "label") if a in positional]:
                problems.append(f"{where}: ax (or axes) and label come after `*`, as keywords")
            elif not (wanted in keywords and isinstance(keywords[wanted], ast.Constant)
                      and keywords[wanted].value is None):
                problems.append(f"{where}: a plot_ takes `{wanted}=None` (a new figure when None)"
                                + (": it draws several panels" if wanted == "axes" else ""))
            if returns != "Figure":
                problems.append(f"{where}: a plot_ returns its Figure, annotated `-> Figure`")
        elif node.name.startswith("draw_"):
            if first != "ax":
                problems.append(f"{where}: a draw_ takes the axes first, draw_x(ax, **params)")
            if returns not in (None, "None") or _returns_a_value(node):
                problems.append(f"{where}: a draw_ returns None (compute what it shows in a function of its own)")
    return problems


def test_every_module_that_draws_is_scanned():
    scanned = {p.relative_to(PACKAGE).as_posix() for p in drawing_modules()}
    assert {"roofline/draw.py", "plotting.py", "figures/roofline.py"} <= scanned, scanned


#: Drawing functions still off the signature in a module this change could not edit, with the reason. An entry
#: goes once its function follows the signature (or moves): the test below fails until it does.
OFF_SIGNATURE_FOR_NOW = {
}


def test_figures_have_the_two_signatures():
    # A static figure builds its own figure or draws on the axes given; a drawer draws on the axes it is given. No
    # exceptions: convert an old plot_x(ax, ...) (its notebook cells become one call and plt.show()).
    problems = [p for path in drawing_modules() for p in figure_signature_problems(path)]
    off = [p for p in problems if p.partition(":")[0] not in OFF_SIGNATURE_FOR_NOW]
    assert not off, "drawing functions out of form:\n" + "\n".join(off)
    fixed = set(OFF_SIGNATURE_FOR_NOW) - {p.partition(":")[0] for p in problems}
    assert not fixed, f"follow the signature now (or moved): remove them from OFF_SIGNATURE_FOR_NOW: {sorted(fixed)}"


def test_the_figures_rule_sees_both_forms(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("def plot_a(ax, table) -> Figure:\n    pass\n\ndef plot_b(axes, t) -> Figure:\n    pass\n\n"
                   "def plot_ok(table, *, ax=None, label='') -> Figure:\n    pass\n\n"
                   "def draw_c(table, ax):\n    pass\n\ndef draw_ok(ax, n=1) -> None:\n    pass\n\n"
                   "def _plot_private(ax):\n    pass\n\ndef plot_d(table, label, ax=None) -> Figure:\n    pass\n\n"
                   "def plot_e(table, *, ax=None):\n    pass\n\n"
                   "def plot_f(table, *, ax=None) -> Figure:\n    fig, axes = plt.subplots(1, 2)\n\n"
                   "def draw_g(ax) -> None:\n    return 3\n")
    found = [p.partition(":")[0] for p in figure_signature_problems(bad)]
    assert found == ["bad.plot_a", "bad.plot_b", "bad.draw_c", "bad.plot_d", "bad.plot_e", "bad.plot_f", "bad.draw_g"]


#: What reads a clock: kernels/ modules hold what the book shows, never what times it (experiments/ times).
CLOCK_ATTRIBUTES = {"event_elapsed_time", "elapsed_time", "perf_counter", "perf_counter_ns", "monotonic", "time_ns"}
CLOCK_MODULES = {"time", "timeit", "labhelpers.timing"}


def clock_reads(name: str, path: Path) -> list[str]:
    """Where module ``name`` reads a clock: an import of a clock module, or a clock function used."""
    found = []
    tree = ast.parse(path.read_text(), filename=str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [f"{path.name}:{node.lineno}: import {a.name}" for a in node.names if a.name in CLOCK_MODULES]
        elif isinstance(node, ast.ImportFrom):
            module = _resolve(name, node.level, node.module) if node.level else node.module
            if module in CLOCK_MODULES or any(f"{module}.{a.name}" in CLOCK_MODULES for a in node.names):
                found.append(f"{path.name}:{node.lineno}: from {module} import ...")
        elif isinstance(node, ast.Attribute) and node.attr in CLOCK_ATTRIBUTES:
            found.append(f"{path.name}:{node.lineno}: .{node.attr}")
    return found


def test_kernels_modules_time_nothing():
    offenders = [hit for name, path in MODULES.items() if name.startswith("labhelpers.kernels")
                 for hit in clock_reads(name, path)]
    assert not offenders, "kernels/ reads a clock (timing belongs in experiments/ or timing.py):\n" + "\n".join(offenders)


def test_the_clock_rule_sees_a_timeline(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("import time\nfrom .. import timing\nfrom numba import cuda\n\n"
                   "def f(a, b):\n    return cuda.event_elapsed_time(a, b), time.perf_counter()\n")
    assert len(clock_reads("labhelpers.kernels.bad", bad)) == 4
