"""Run the book's setup cells the way Colab does: Colab's Python and packages, a locally built wheel, a fresh kernel.

Usage: python tools/colab_install_check.py [NOTEBOOK ...] [--cells N | --all-cells] [--freeze FILE] [--venv DIR]

Colab's GPU runtime is modeled from its own published package list, ``tools/colab/pip-freeze.gpu.txt`` (see
``tools/colab/README.md`` for its source and commit), and its Python (``tools/colab/os-info-gpu.txt``):

1. A virtual environment of that Python version (found on PATH, under pyenv or through uv) holding Colab's
   versions of every package the book's notebooks use and everything pip pulls in for them (``RUNTIME_ROOTS``,
   installed with the whole list as constraints). It is cached in ``.venv-colab`` (``$COLAB_VENV``), rebuilt
   only when the list or the roots change, and reset to Colab's state before each notebook. Colab's CUDA wheels
   (``nvidia-*``, ``cupy-cuda12x``, ``cuda-python``, ``cuda-toolkit``) are not installed: without a driver they
   cannot load. Their part of the setup is checked against the list instead: the installer's plan for a CUDA 12
   driver, computed against Colab's versions, must replace nothing Colab ships.
2. The wheel of this checkout (what a release publishes), put next to each notebook as a student uploads it.
3. Each notebook (default: every chapter in book/) gets a fresh kernel that runs its setup cell exactly as
   committed, then its first ``--cells`` code cells (``--all-cells``: all of them), under the simulator. The
   OpenCL ICD loader is pointed at an empty folder (``OCL_ICD_VENDORS``): Colab has no CPU OpenCL driver, so
   chapter 12's setup must bring one.

4. The path where labhelpers itself cannot be installed: the first notebook's setup cell in a fresh kernel, in a
   folder without a wheel, with git pointed at an unreachable host (as for a release not published yet). Its cell
   must stop "Run all" with one message saying what to do and no traceback, and no later cell may run.

It fails when a cell raises (other than cells tagged ``raises-exception``), when the setup changes a version of
a package Colab ships (a downgrade or replacement the book does not need), and when a package Python had already
loaded was replaced without the setup cell saying, in words, to restart the session. After an announced restart
it runs the notebook again in a fresh kernel, as the student would. Exits 1 with the reasons.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
COLAB = ROOT / "tools" / "colab"
FREEZE = COLAB / "pip-freeze.gpu.txt"
#: What the notebooks import from Colab's runtime, and the kernel that runs them; pip adds what these need.
RUNTIME_ROOTS = ("pip", "numpy", "numba", "llvmlite", "numba-cuda", "cuda-bindings", "cuda-core", "cuda-pathfinder",
                 "pandas", "matplotlib", "scipy", "ipywidgets", "widgetsnbextension", "jupyterlab-widgets", "tqdm",
                 "ipykernel", "ipython", "nbclient", "nbformat", "packaging")

DRIVER = ROOT / "tools" / "colab" / "run_notebooks.py"
#: The model's packages as built, in its folder: ``{name: version}``.
BASE = "colab-base.json"


def colab_python_version(path: Path) -> str:
    """``"3.13"`` from the ``Python 3.13.15`` line of Colab's os-info file."""
    found = re.search(r"^Python (\d+)\.(\d+)", path.read_text(), re.M)
    if not found:
        raise SystemExit(f"error: no 'Python X.Y' line in {path}")
    return f"{found[1]}.{found[2]}"


def os_info(freeze: Path) -> Path:
    """The os-info file published with ``freeze`` (``pip-freeze.gpu.txt`` -> ``os-info-gpu.txt``)."""
    return freeze.with_name(freeze.name.replace("pip-freeze.", "os-info-"))


def find_python(version: str) -> str:
    """An interpreter of ``version`` (e.g. 3.13): on PATH, under pyenv, or one uv manages; exits saying how to get one."""
    candidates = [shutil.which(f"python{version}")]
    pyenv = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")) / "versions"
    candidates += sorted(str(p) for p in pyenv.glob(f"{version}.*/bin/python{version}"))
    if shutil.which("uv"):
        found = subprocess.run(["uv", "python", "find", version], capture_output=True, text=True)
        candidates.append(found.stdout.strip() if found.returncode == 0 else None)
    for c in candidates:
        if c and subprocess.run([c, "-c", "import venv"], capture_output=True).returncode == 0:
            return c
    how = (f"python{version} on PATH, pyenv versions, uv python find; install it with e.g. `pyenv install {version}` "
           f"or `uv python install {version}`")
    if os.environ.get("COLAB_STRICT_PYTHON") == "1":
        raise SystemExit(f"error: Colab runs Python {version} and none was found here ({how}).")
    # Colab's packages install on any Python the book supports: model Colab's packages on this one, and say so.
    print(f"note: Colab runs Python {version}, which is not installed here ({how}); the check models Colab's "
          f"packages on Python {sys.version_info.major}.{sys.version_info.minor} instead "
          "(COLAB_STRICT_PYTHON=1 makes this an error).", flush=True)
    return sys.executable


def colab_pins(freeze: Path) -> dict[str, str]:
    """``{name: version}`` of every ``name==version`` line of Colab's list (local versions like ``+cu128`` kept)."""
    pins = {}
    for line in freeze.read_text().splitlines():
        m = re.match(r"^([A-Za-z0-9_.-]+)==(\S+)$", line.strip())
        if m:
            pins[re.sub(r"[-_.]+", "-", m[1]).lower()] = m[2]
    return pins


def run(cmd: list, **kwargs) -> subprocess.CompletedProcess:
    """Run a command; exit with its output when it fails."""
    done = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, **kwargs)
    if done.returncode:
        raise SystemExit(f"error: {' '.join(map(str, cmd[:5]))} ... failed:\n{done.stdout[-3000:]}\n"
                         f"{done.stderr[-3000:]}")
    return done


def ensure_venv(venv: Path, python: str, freeze: Path) -> Path:
    """The cached model of Colab's runtime in ``venv`` (built when missing or stale); returns its python."""
    pins = colab_pins(freeze)
    stamp = hashlib.sha256((freeze.read_text() + " ".join(RUNTIME_ROOTS) + python).encode()).hexdigest()
    vpython = venv / "bin" / "python"
    if (venv / ".colab-stamp").exists() and (venv / ".colab-stamp").read_text() == stamp and vpython.exists() \
            and (venv / BASE).exists():
        print(f"==> Colab model {venv} is up to date")
        return vpython
    print(f"==> building the Colab model in {venv} (Python {colab_python_version(os_info(freeze))}"
          f", {len(RUNTIME_ROOTS)} packages at Colab's versions and what they need)", flush=True)
    run([python, "-m", "venv", "--clear", venv])
    constraints = venv / "colab-constraints.txt"
    constraints.write_text("".join(f"{n}=={v}\n" for n, v in pins.items() if "+" not in v))
    run([vpython, "-m", "pip", "install", "-q", "--disable-pip-version-check", f"pip=={pins['pip']}"])
    run([vpython, "-m", "pip", "install", "-q", "--disable-pip-version-check", "-c", constraints, *RUNTIME_ROOTS])
    # What every notebook starts from: the check puts the environment back to this before each one.
    run([vpython, "-c", "import importlib.metadata as m, json, sys; json.dump({d.metadata['Name']: d.version "
         "for d in m.distributions()}, open(sys.argv[1], 'w'), indent=0, sort_keys=True)", venv / BASE])
    (venv / ".colab-stamp").write_text(stamp)
    return vpython


def build_wheel(out: Path) -> Path:
    """The wheel of this checkout (``pip wheel --no-deps``), as a release builds it."""
    run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--disable-pip-version-check", "-w", out, ROOT])
    return next(out.glob("labhelpers-*.whl"))


#: Runs (in the model's python) a notebook's setup cell, then one more cell, stopping at the first error as "Run all"
#: does; prints the two cells' outputs as JSON.
NOT_INSTALLED_PROBE = """
import json, sys
import nbformat
from nbclient import NotebookClient
nb = nbformat.read(sys.argv[1], as_version=4)
setup = next(c for c in nb.cells if c.cell_type == "code")
setup.outputs, setup.execution_count = [], None
run = nbformat.v4.new_notebook(cells=[setup, nbformat.v4.new_code_cell("print('the next cell ran')")])
try:
    NotebookClient(run, timeout=600, kernel_name="python3", resources={"metadata": {"path": sys.argv[2]}}).execute()
except Exception:
    pass
print("OUTPUTS " + json.dumps([c.get("outputs", []) for c in run.cells]))
"""


def check_not_installed(vpython: Path, notebook: Path, work: Path, env: dict[str, str]) -> list[str]:
    """The setup cell where labhelpers cannot be installed (no wheel, the release unreachable): its problems."""
    folder = work / "not-installed"
    folder.mkdir()
    unreachable = dict(env, GIT_CONFIG_COUNT="1", GIT_CONFIG_KEY_0="url.https://unreachable.invalid/.insteadOf",
                       GIT_CONFIG_VALUE_0="https://github.com/", PIP_NO_INPUT="1")
    done = subprocess.run([str(vpython), "-c", NOT_INSTALLED_PROBE, str(notebook), str(folder)], env=unreachable,
                          capture_output=True, text=True, cwd=folder)
    said = [line for line in done.stdout.splitlines() if line.startswith("OUTPUTS ")]
    if not said:
        return [f"the not-installed probe failed: {done.stderr[-1500:]}"]
    setup, after = json.loads(said[0][8:])
    errors = [o for o in setup if o["output_type"] == "error"]
    shown = "".join(o.get("text", "") for o in setup if o["output_type"] == "stream")
    shown += "".join("\n".join(o["traceback"]) for o in errors)
    print("    without a wheel and without the release, the setup cell shows:\n"
          + "\n".join("      " + line for line in re.sub(r"\x1b\[[0-9;]*m", "", shown).strip().splitlines()[-8:]))
    problems = []
    if not errors:
        problems.append("without labhelpers, the setup cell did not stop the notebook")
    elif any("Traceback" in line for o in errors for line in o["traceback"]):
        problems.append("without labhelpers, the setup cell stopped with a traceback, not one message")
    elif not any("labhelpers-*.whl" in o["evalue"] and "run this cell again" in o["evalue"] for o in errors):
        problems.append(f"without labhelpers, the setup cell's message does not say what to do: {errors[0]['evalue']!r}")
    if after:
        problems.append("without labhelpers, the cell after the setup cell ran")
    return problems


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("notebooks", nargs="*", help="default: every chapter, book/*.ipynb")
    parser.add_argument("--cells", type=int, default=3, help="code cells to run after the setup cell (default 3)")
    parser.add_argument("--all-cells", action="store_true", help="run every cell of each notebook")
    parser.add_argument("--freeze", type=Path, default=FREEZE, help="Colab's pip freeze (default: %(default)s)")
    parser.add_argument("--numpy", metavar="VERSION", help="model a runtime whose NumPy is VERSION (e.g. 2.5.0, "
                        "newer than the book supports), imported before the setup cell as Colab's kernel does")
    parser.add_argument("--host-opencl", action="store_true", help="let chapter 12 see this machine's OpenCL "
                        "drivers (by default none: Colab has no CPU driver, so the setup must install one)")
    parser.add_argument("--venv", type=Path, default=Path(os.environ.get("COLAB_VENV", ROOT / ".venv-colab")))
    args = parser.parse_args()
    os.environ.pop("PYTHONPATH", None)  # the model must see only its own packages (src/ holds labhelpers' egg-info)
    notebooks = [Path(p).resolve() for p in args.notebooks] or sorted((ROOT / "book").glob("*.ipynb"))
    start = time.monotonic()
    freeze = args.freeze.resolve()
    version = colab_python_version(os_info(freeze))
    vpython = ensure_venv(args.venv.resolve(), find_python(version), freeze)
    work = Path(tempfile.mkdtemp(prefix="colab-check-"))
    try:
        wheel = build_wheel(work / "dist")
        print(f"==> {len(notebooks)} notebook(s) from {wheel.name} on Colab's packages "
              f"({time.monotonic() - start:.0f} s so far)", flush=True)
        env = {k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"}
        env.update(LABHELPERS_BACKEND="sim", MPLBACKEND="module://matplotlib_inline.backend_inline",
                   PATH=f"{vpython.parent}:{env.get('PATH', '')}", PYTHONUNBUFFERED="1",
                   PYDEVD_DISABLE_FILE_VALIDATION="1")
        if not args.host_opencl:  # Colab has NVIDIA's ICD file only: no OpenCL driver for the CPU
            (work / "OpenCL-vendors").mkdir()
            env["OCL_ICD_VENDORS"] = str(work / "OpenCL-vendors")
        config = {"base": str(vpython.parent.parent / BASE), "wheel": str(wheel), "freeze": str(freeze), "work": str(work),
                  "cells": None if args.all_cells else args.cells, "numpy": args.numpy, "notebooks": [str(p) for p in notebooks]}
        (work / "config.json").write_text(json.dumps(config))
        done = subprocess.run([str(vpython), str(DRIVER), str(work / "config.json")], env=env, cwd=work)
        print("==> the setup cell where labhelpers cannot be installed (no wheel, the release unreachable)", flush=True)
        problems = check_not_installed(vpython, notebooks[0], work, env)
        for problem in problems:
            print("problem:", problem)
        print(f"==> Colab install check: {time.monotonic() - start:.0f} s in all")
        return done.returncode or (1 if problems else 0)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
