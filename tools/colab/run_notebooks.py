"""The half of tools/colab_install_check.py that runs inside the model of Colab's runtime (its venv's python).

Usage (by colab_install_check.py only): python run_notebooks.py CONFIG.json

For each notebook: reset the environment to Colab's packages, run the setup cell and the first cells in a fresh
kernel from a folder holding the wheel (as a student who uploaded it), and compare the packages before and after.
Prints one line per notebook and every problem; exits 1 if there is any.
"""

from __future__ import annotations

import importlib
import importlib.metadata as metadata
import json
import re
import runpy
import shutil
import subprocess
import sys
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient

#: Ours: installed by the setup cell on purpose, never a package of Colab's.
OURS = {"labhelpers"}
#: What the kernel reports after the setup cell: distributions with a loaded module older than what is installed.
PROBE = """
import importlib.metadata as _md, json as _json, sys as _sys
_stale = []
for _dist in {replaced!r}:
    _tops = (_md.distribution(_dist).read_text("top_level.txt") or "").split() or [_dist.replace("-", "_")]
    for _top in _tops:
        _mod = _sys.modules.get(_top)
        _v = getattr(_mod, "__version__", None)
        if _mod is not None and _v is not None and _v != _md.version(_dist):
            _stale.append(f"{{_dist}} (loaded {{_v}}, installed {{_md.version(_dist)}})")
print("PROBE " + _json.dumps(_stale))
"""


def normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def snapshot() -> dict[str, str]:
    """``{name: version}`` of what this environment holds now (read from disk, not from a cache)."""
    importlib.invalidate_caches()
    out = {}
    for dist in metadata.distributions():
        if dist.metadata["Name"]:
            out.setdefault(normalize(dist.metadata["Name"]), dist.version)
    return out


def pip(*args: str) -> None:
    subprocess.run([sys.executable, "-m", "pip", *args, "-q", "--disable-pip-version-check"], check=True,
                   capture_output=True, text=True)


def reset(base: dict[str, str]) -> None:
    """Back to the environment as built: remove what was added, put back what was replaced."""
    now = snapshot()
    added = sorted(set(now) - set(base))
    if added:
        pip("uninstall", "-y", *added)
    changed = [f"{n}=={v}" for n, v in base.items() if now.get(n) != v]
    if changed:
        pip("install", "--no-deps", *changed)


def first_cells(path: Path, count: int | None) -> nbformat.NotebookNode:
    """The notebook's setup cell and its next ``count`` code cells (all of them with None), as committed."""
    nb = nbformat.read(path, as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    keep = code if count is None else code[: count + 1]
    for c in keep:
        c.outputs, c.execution_count = [], None
    nb.cells = keep
    return nb


def errors(cells) -> list[str]:
    """The errors of cells not tagged ``raises-exception``: ``ename: evalue`` and the cell's first line."""
    out = []
    for cell in cells:
        if "raises-exception" in cell.metadata.get("tags", []):
            continue
        for o in cell.outputs:
            if o.output_type == "error":
                first = cell.source.strip().splitlines()[0] if cell.source.strip() else ""
                out.append(f"{o.ename}: {o.evalue.strip()[:400]} (cell: {first[:80]!r})")
    return out


def text(cell) -> str:
    """What a cell printed, and its error's message."""
    parts = [o.get("text", "") for o in cell.outputs if o.output_type == "stream"]
    parts += ["\n".join(o.traceback) for o in cell.outputs if o.output_type == "error"]
    return "".join(parts).strip()


def execute(nb, folder: Path, before: dict[str, str], preload: str = "") -> tuple[list, list[str]]:
    """Run ``nb`` cell by cell in a fresh kernel, stopping where the setup cell stops (as "Run all" does).

    ``preload`` runs first, as Colab's kernel imports modules before the notebook's first cell. Returns the cells
    run, and the distributions the setup cell replaced whose loaded modules are older than the installed ones
    (asked of the kernel right after the setup cell, in a probe cell not counted as the notebook's).
    """
    probe = nbformat.v4.new_code_cell("")
    nb.cells.insert(1, probe)
    first = 0
    if preload:
        nb.cells.insert(0, nbformat.v4.new_code_cell(preload))
        first = 1
    client = NotebookClient(nb, timeout=600, kernel_name="python3", allow_errors=True,
                            resources={"metadata": {"path": str(folder)}})
    stale: list[str] = []
    with client.setup_kernel():
        if preload:
            client.execute_cell(nb.cells[0], 0)
        setup = nb.cells[first]
        client.execute_cell(setup, first)
        replaced = sorted(n for n, (old, new) in changes(before, snapshot()).items() if old and new)
        probe.source = PROBE.format(replaced=replaced)
        client.execute_cell(probe, first + 1)
        said = [line for line in text(probe).splitlines() if line.startswith("PROBE ")]
        stale = json.loads(said[0][6:]) if said else [f"(the probe failed: {text(probe)[-300:]})"]
        if not any(o.output_type == "error" for o in setup.outputs):
            for index in range(first + 2, len(nb.cells)):
                client.execute_cell(nb.cells[index], index)
    nb.cells.remove(probe)
    if preload:
        del nb.cells[0]
    return nb.cells, stale


def changes(before: dict, after: dict) -> dict:
    return {n: (before.get(n), after.get(n)) for n in sorted(set(before) | set(after))
            if before.get(n) != after.get(n) and n not in OURS}


def gpu_plan(wheel: str, pins: dict[str, str], needs: list[str]) -> list[str]:
    """What the setup cell would install on Colab's GPU runtime (CUDA 12 driver), computed against Colab's list."""
    installed = Path(metadata.distribution("labhelpers").locate_file("labhelpers"))
    im = runpy.run_path(str(installed / "install_missing.py"))
    requirements = metadata.requires("labhelpers") or []
    colab = im["Installed"](pins)
    return im["plan"](requirements, 12, needs, colab) + (im["opencl_plan"](colab) if "opencl" in needs else [])


def needs_of(nb: nbformat.NotebookNode) -> list[str]:
    found = re.search(r'\["main"\]\(needs=(\[[^\]]*\])\)', nb.cells[0].source)
    return json.loads(found[1]) if found else []


def main() -> int:
    config = json.loads(Path(sys.argv[1]).read_text())
    work, wheel = Path(config["work"]), Path(config["wheel"])
    pins = {}
    for line in Path(config["freeze"]).read_text().splitlines():
        m = re.match(r"^([A-Za-z0-9_.-]+)==(\S+)$", line.strip())
        if m:
            pins[normalize(m[1])] = m[2]
    built = {normalize(n): v for n, v in json.loads(Path(config["base"]).read_text()).items()}
    base = dict(built)
    reset(base)
    if config.get("numpy"):  # a runtime whose NumPy is newer than the book supports, loaded before the setup
        pip("install", "--no-deps", f"numpy=={config['numpy']}")
        base["numpy"] = config["numpy"]
    preload = "import numpy" if config.get("numpy") else ""
    problems: list[str] = []
    colab_ships = {n for n, v in base.items() if pins.get(n) == v}
    # The GPU half of the setup, against Colab's list: the CUDA wheels are not installed here.
    pip("install", "--no-deps", str(wheel))
    for needs in ([], ["opencl"]):
        todo = gpu_plan(str(wheel), pins, needs)
        shipped = [t for t in todo if normalize(re.split(r"[\[<>=!~;]", t)[0]) in pins]
        print(f"    on Colab's GPU runtime (CUDA 12) the setup cell{' of chapter 12' if needs else ''} would install: "
              f"{', '.join(todo) or 'nothing'}")
        problems += [f"on Colab's GPU runtime the setup would replace {t} that Colab ships" for t in shipped]
    for path in map(Path, config["notebooks"]):
        started = time.monotonic()
        reset(base)
        nb = first_cells(path, config["cells"])
        folder = work / "nb" / path.stem
        folder.mkdir(parents=True, exist_ok=True)
        shutil.copy(wheel, folder)  # as a student uploads it next to the notebook
        name = f"{path.parent.name}/{path.name}"
        runs, restarted = 0, False
        while True:
            runs += 1
            cells, stale = execute(nbformat.from_dict(json.loads(json.dumps(nb))), folder, snapshot(),
                                   preload if runs == 1 else "")
            setup_said = text(cells[0])
            announced = "Restart session" in setup_said
            if announced and not restarted and runs == 1:
                restarted = True  # the student restarts the session and runs the notebook again
                first_said = setup_said
                continue
            break
        got = changes(base, snapshot())
        mine = [f"{path.name}: {e}" for e in errors(cells)]
        replaced = {n: v for n, v in got.items() if n in colab_ships and v[0] is not None}
        mine += [f"{path.name}: the setup replaced {n} {old} (Colab's) by {new or 'nothing'}"
                 for n, (old, new) in replaced.items()]
        if stale and not announced:
            mine.append(f"{path.name}: modules loaded before the setup replaced them, and no restart was asked "
                        f"for: {', '.join(stale)}")
        added = [f"{n} {new}" for n, (old, new) in got.items() if old is None]
        status = "FAIL" if mine else "ok  "
        note = (f"; added {', '.join(added)}" if added else "") + ("; restart announced, ran again" if restarted else "")
        print(f"{status} {name}: {len(cells)} cells in {time.monotonic() - started:.1f} s{note}", flush=True)
        notes = [line for line in setup_said.splitlines() if line.startswith("labhelpers:")]
        if notes and not restarted and not mine:
            print("\n".join("      " + line for line in notes))
        if restarted:
            print("    the setup cell said, before the restart:\n"
                  + "\n".join("      " + line for line in first_said.splitlines()[-6:]))
        if mine:
            print("    the setup cell said:\n" + "\n".join("      " + line for line in setup_said.splitlines()[-12:]))
        problems += mine
    reset(built)
    for p in problems:
        print("problem:", p)
    print(f"Colab install check: {len(config['notebooks'])} notebook(s), {len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
