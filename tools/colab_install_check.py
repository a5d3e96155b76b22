"""Install labhelpers the way a notebook's setup cell does on Colab, into a clean environment, and run a chapter.

Usage: python tools/colab_install_check.py [book/01_cuda_in_python.ipynb] [--keep DIR]

1. Build the package's wheel from this checkout (what a release publishes).
2. Make a fresh virtual environment holding what a Colab runtime already has (NumPy, pandas, Matplotlib, SciPy,
   ipywidgets, tqdm, Numba, IPython and a kernel) but not labhelpers and not numba-cuda.
3. Execute the chapter there with its setup cell exactly as committed, except that the ``%pip install`` line
   installs the local wheel instead of the release on GitHub. The setup cell must install labhelpers without
   touching what the runtime has, install what is missing (numba-cuda) with ``install_missing.py``, and the whole
   chapter must then run without an error (under the simulator: there is no GPU here).

Exits 1 with the reason when any step fails. Needs the package registry (pip), like a Colab runtime.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))

from notebook_tools import SETUP_MARKER  # noqa: E402

sys.path.insert(0, str(ROOT / "src"))
from labhelpers._release import pip_requirement  # noqa: E402

#: What a Colab runtime already has, pinned as in requirements.txt so pip's cache serves them.
RUNTIME_PACKAGES = ("numpy", "pandas", "matplotlib", "scipy", "ipywidgets", "tqdm", "numba", "llvmlite",
                    "ipykernel", "nbclient", "nbformat", "packaging")

DRIVER = r"""
import json, os, sys
import nbformat
from nbclient import NotebookClient
path, wheel, requirement = sys.argv[1:4]
nb = nbformat.read(path, as_version=4)
setup = next(c for c in nb.cells if c.cell_type == "code")
assert requirement in setup.source, "the setup cell does not install the release requirement"
setup.source = setup.source.replace(requirement, wheel)
NotebookClient(nb, timeout=600, kernel_name="python3", allow_errors=True,
               resources={"metadata": {"path": os.path.dirname(path)}}).execute()
errors = []
for cell in nb.cells:
    if cell.cell_type != "code":
        continue
    for out in cell.outputs:
        if out.output_type == "error" and "raises-exception" not in cell.metadata.get("tags", []):
            errors.append(f"{out.ename}: {out.evalue} in cell: {cell.source[:120]!r}")
setup_text = "".join(o.get("text", "") for o in setup.outputs if o.output_type == "stream")
print(json.dumps({"errors": errors, "setup_output": setup_text}))
"""


def pinned(names: tuple[str, ...]) -> list[str]:
    """``name==version`` from requirements.txt for each name (the name alone if it is not pinned there)."""
    pins = {}
    for line in (ROOT / "requirements.txt").read_text().splitlines():
        if "==" in line and not line.startswith("#"):
            name, version = line.split("==", 1)
            pins[name.strip().lower().replace("_", "-")] = version.strip()
    return [f"{n}=={pins[n]}" if n in pins else n for n in names]


def run(cmd: list[str], **kwargs) -> subprocess.CompletedProcess:
    """Run a command, printing it; raise with its output when it fails."""
    print("+", " ".join(str(c) for c in cmd[:6]), "..." if len(cmd) > 6 else "", flush=True)
    done = subprocess.run(cmd, capture_output=True, text=True, **kwargs)
    if done.returncode:
        raise SystemExit(f"error: {' '.join(map(str, cmd[:4]))} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    return done


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("notebook", nargs="?", default="book/01_cuda_in_python.ipynb")
    parser.add_argument("--keep", default=None, help="work in this folder and keep it (default: a temporary one)")
    args = parser.parse_args()
    work = Path(args.keep or tempfile.mkdtemp(prefix="colab-check-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(work / "dist"), str(ROOT)])
        wheel = next((work / "dist").glob("labhelpers-*.whl"))
        base = os.environ.get("PYTHON", shutil.which("python3") or sys.executable)
        venv = work / "venv"
        run([base, "-m", "venv", "--clear", str(venv)])
        python = venv / "bin" / "python"
        run([str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", *pinned(RUNTIME_PACKAGES)])
        # The notebook runs from a copy whose folder holds nothing of this checkout: it must import the installed
        # package, not src/.
        copy = work / "nb" / Path(args.notebook).name
        copy.parent.mkdir(exist_ok=True)
        shutil.copy(ROOT / args.notebook, copy)
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
        env.update(LABHELPERS_BACKEND="sim", MPLBACKEND="Agg", PATH=f"{venv / 'bin'}:{env.get('PATH', '')}")
        done = run([str(python), "-c", DRIVER, str(copy), str(wheel), pip_requirement()], env=env, cwd=work)
        result = json.loads(done.stdout.strip().splitlines()[-1])
        print("setup cell printed:\n" + "\n".join("    " + line for line in result["setup_output"].splitlines()))
        problems = list(result["errors"])
        if "installing what this runtime lacks" not in result["setup_output"] or "numba-cuda" not in \
                result["setup_output"]:
            problems.append("the setup cell did not install the missing numba-cuda")
        frozen = run([str(python), "-m", "pip", "freeze"]).stdout
        numpy_pin = next(p for p in pinned(("numpy",)))
        if numpy_pin.lower() not in frozen.lower():
            problems.append(f"the setup cell changed the runtime's NumPy (expected {numpy_pin} to stay)")
        for p in problems:
            print("problem:", p)
        print(f"Colab install check of {args.notebook} from {wheel.name}: {len(problems)} problem(s)")
        return 1 if problems else 0
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    assert SETUP_MARKER  # the setup cell this check runs is the one notebook_tools writes
    sys.exit(main())
