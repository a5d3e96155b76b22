"""Record every kernel launch the package tests make, with argument types and launch configurations.

    PYTHONPATH=$PWD/src LABHELPERS_BACKEND=sim python tools/record_launches.py [pytest args...]

Runs pytest in this process (default: the kernel tests listed in DEFAULT_TESTS) under the simulator with a
launch hook (``labhelpers.launchguard.add_launch_hook``), and writes ``tools/compile_check/launches.json``: one
entry per kernel (its public path, ``labhelpers.kernels.<topic>.<name>``, ``labhelpers.timing_kernels.<name>`` or
``labs/solutions/<file>.py:<name>``)
with the Numba argument types of every distinct signature it was launched with, and every distinct
(threads per block, dynamic shared memory bytes) it was launched at. ``tests/test_compile_targets.py`` compiles
these for every architecture students get and checks the launches against each architecture's limits.

Types are recorded, not derived from compiled signatures: under the simulator nothing is compiled, and a kernel's
signatures are whatever its callers pass (float32 or float64 arrays, C or A layout, int64 scalars), which only a
real launch shows.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import sys
from pathlib import Path
from typing import Any

import numpy as np


def _topics() -> tuple[str, ...]:
    """Every chapter's topic, read from src/labhelpers/chapters.py without importing labhelpers (which would choose
    the backend before :func:`main` sets the simulator)."""
    spec = importlib.util.spec_from_file_location(
        "chapters_table", Path(__file__).resolve().parents[1] / "src" / "labhelpers" / "chapters.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module.TOPICS


ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "tools" / "compile_check" / "launches.json"
DEFAULT_TESTS = [f"tests/test_{topic}.py" for topic in _topics()] + ["tests/test_roofline_stopwatch.py", "tests/test_labs.py"]


def kernel_path(kernel: Any) -> str | None:
    """The public path of a kernel of the package or of a lab solution, or None for any other kernel."""
    fn = getattr(kernel, "py_func", None) or getattr(kernel, "fn", None)
    if fn is None:
        return None
    module, name = getattr(fn, "__module__", "") or "", fn.__name__
    if module.startswith("labhelpers.kernels.") or module == "labhelpers.timing_kernels":  # the timer's kernels too
        # the topic's module (labhelpers.kernels.nbody) when it exports the kernel, else the module defining it
        # (labhelpers.kernels.scan.patterns: a topic split into a package re-exports only what the book uses)
        for public in dict.fromkeys((".".join(module.split(".")[:3]), module)):
            try:
                if getattr(importlib.import_module(public), name, None) is kernel:
                    return f"{public}.{name}"
            except ImportError:
                pass
        return None  # a test's mutant or a kernel made by a factory: not reachable by a public path (not checked)
    filename = Path(fn.__code__.co_filename).resolve()
    solutions = ROOT / "labs" / "solutions"
    if filename.parent == solutions:
        return f"labs/solutions/{filename.name}:{name}"
    return None


def type_name(value: Any) -> str:
    """Numba's type of a kernel argument as a signature string (simulator arrays typed as the NumPy array inside)."""
    from numba import typeof

    inner = getattr(value, "_ary", None)
    if inner is not None:
        value = inner
    if isinstance(value, np.ndarray):
        return str(typeof(value))
    return str(typeof(value))


def threads_per_block(block: Any) -> int:
    """Threads of one block of a launch configuration's block size (int or tuple)."""
    return int(np.prod(block)) if isinstance(block, tuple) else int(block)


class Recorder:
    """A launch hook that collects kernels, argument types and launch configurations."""

    def __init__(self) -> None:
        self.kernels: dict[str, dict[str, set]] = {}

    def __call__(self, kernel: Any, configuration: tuple, args: tuple) -> None:
        path = kernel_path(kernel)
        if path is None:
            return
        try:
            signature = tuple(type_name(a) for a in args)
        except Exception:  # noqa: BLE001  a simulator stand-in (the relaxed simulator's arrays): not a GPU launch
            return
        entry = self.kernels.setdefault(path, {"signatures": set(), "launches": set()})
        entry["signatures"].add(signature)
        shared = int(configuration[3]) if len(configuration) == 4 else 0
        entry["launches"].add((threads_per_block(configuration[1]), shared))

    def as_json(self) -> dict:
        """The manifest, sorted so re-recording gives a stable diff."""
        return {path: {"signatures": [list(s) for s in sorted(e["signatures"])],
                       "launches": [{"threads": t, "dynamic_shared": d} for t, d in sorted(e["launches"])]}
                for path, e in sorted(self.kernels.items())}


def main(argv: list[str]) -> int:
    """Run pytest with the recorder, then write (merge into) launches.json."""
    os.environ.setdefault("LABHELPERS_BACKEND", "sim")
    import pytest

    from labhelpers import launchguard

    recorder = Recorder()
    launchguard.add_launch_hook(recorder)
    try:
        code = pytest.main(["-q", "-p", "no:cacheprovider", *(argv or DEFAULT_TESTS)])
    finally:
        launchguard.remove_launch_hook(recorder)
    manifest = recorder.as_json()
    if argv and OUT.exists():  # a partial run adds to what is there
        old = json.loads(OUT.read_text())
        for path, entry in manifest.items():
            prev = old.setdefault(path, {"signatures": [], "launches": []})
            prev["signatures"] = sorted({tuple(s) for s in prev["signatures"]} | {tuple(s) for s in entry["signatures"]})
            prev["signatures"] = [list(s) for s in prev["signatures"]]
            launches = {(l["threads"], l["dynamic_shared"]) for l in prev["launches"] + entry["launches"]}
            prev["launches"] = [{"threads": t, "dynamic_shared": d} for t, d in sorted(launches)]
        manifest = dict(sorted(old.items()))
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(manifest, indent=1) + "\n")
    print(f"{len(manifest)} kernels recorded in {OUT.relative_to(ROOT)} (pytest exit {code})")
    return int(code)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
