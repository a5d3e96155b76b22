"""Models have no GPU and no kernels: no module under ``src/labhelpers/models`` imports Numba or CuPy, or the
modules that ask the device, or calls into the device.

A model takes the hardware as an argument (an ``SMLimits``, a ``GPU`` or its figures, from
:mod:`labhelpers.gpus`); asking the device in hand is :mod:`labhelpers.device`'s job, and the caller passes what
it answered (``gpus.current()``). Read from the source with :mod:`ast`, so nothing is imported or run.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

MODELS = Path(__file__).resolve().parents[1] / "src" / "labhelpers" / "models"

#: Top-level packages a model may not import (kernels, device arrays, the GPU itself).
FORBIDDEN_PACKAGES = ("numba", "cupy", "cuda", "pycuda", "pynvml")
#: Modules of labhelpers that ask the device or choose the backend: a model imports none of them.
FORBIDDEN_LABHELPERS = ("device", "backend", "xp", "arrays", "kernels", "launchguard", "racecheck", "timing")
#: Calls that ask the device in hand (directly, or through the one description: ``gpus.current()``).
DEVICE_CALLS = ("device_info", "get_current_device", "current_context", "is_gpu", "is_simulator", "require_gpu",
                "list_devices")
#: Calls that ask the device when made on these modules: ``gpus.current()``.
DEVICE_CALLS_ON = {"gpus": ("current", "from_device_info", "sm_limits")}


def _model_files() -> list[Path]:
    return sorted(p for p in MODELS.glob("*.py"))


def _labhelpers_module(node: ast.ImportFrom) -> list[str]:
    """The labhelpers modules a relative ``from .. import x`` / ``from ..x import y`` in a model names."""
    if node.level == 0:
        parts = (node.module or "").split(".")
        if parts[0] != "labhelpers":
            return []
        rest = parts[1:]
    elif node.level == 1:  # from .banks import ...: a sibling model
        return []
    else:
        rest = (node.module or "").split(".") if node.module else []
    if rest:
        return [rest[0]]
    return [alias.name for alias in node.names]


def problems(source: str) -> list[str]:
    """What in one model's source imports or calls into the GPU, one line each (empty when nothing does)."""
    tree = ast.parse(source)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                top = alias.name.split(".")[0]
                if top in FORBIDDEN_PACKAGES:
                    found.append(f"line {node.lineno}: import {alias.name}")
                if top == "labhelpers" and alias.name.split(".")[1:2] and \
                        alias.name.split(".")[1] in FORBIDDEN_LABHELPERS:
                    found.append(f"line {node.lineno}: import {alias.name}")
        elif isinstance(node, ast.ImportFrom):
            top = (node.module or "").split(".")[0]
            if node.level == 0 and top in FORBIDDEN_PACKAGES:
                found.append(f"line {node.lineno}: from {node.module} import {', '.join(a.name for a in node.names)}")
            for name in _labhelpers_module(node):
                if name in FORBIDDEN_LABHELPERS:
                    found.append(f"line {node.lineno}: imports labhelpers.{name}")
        elif isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Name) and func.id in DEVICE_CALLS:
                found.append(f"line {node.lineno}: calls {func.id}()")
            elif isinstance(func, ast.Attribute):
                owner = func.value.id if isinstance(func.value, ast.Name) else None
                if func.attr in DEVICE_CALLS or func.attr in DEVICE_CALLS_ON.get(owner, ()):
                    found.append(f"line {node.lineno}: calls {owner or '...'}.{func.attr}()")
                elif owner == "cuda":
                    found.append(f"line {node.lineno}: calls cuda.{func.attr}()")
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "cuda":
            found.append(f"line {node.lineno}: uses cuda.{node.attr}")
    return sorted(set(found))


@pytest.mark.parametrize("path", _model_files(), ids=lambda p: p.name)
def test_models_import_no_gpu_and_ask_no_device(path: Path):
    found = problems(path.read_text())
    assert not found, (f"src/labhelpers/models/{path.name} must have no GPU (CONTRIBUTING: models have no GPU and "
                       f"no kernels): take the hardware as an argument (gpus.SMLimits, gpus.GPU) and let the caller "
                       f"ask the device (gpus.current()); found {found}")


def test_the_scan_finds_what_it_forbids():
    """The check itself: each way of reaching the GPU from a model is caught, and a plain model passes."""
    bad = {
        "from numba import cuda": "from numba import cuda",
        "import cupy as cp": "import cupy",
        "from ..device import device_info": "imports labhelpers.device",
        "from .. import backend, validate": "imports labhelpers.backend",
        "import labhelpers.device": "import labhelpers.device",
        "x = gpus.current().sm": "calls gpus.current()",
        "info = device_info()": "calls device_info()",
        "d = cuda.get_current_device()": "get_current_device",
        "s = gpus.sm_limits(info)": "calls gpus.sm_limits()",
    }
    for source, expected in bad.items():
        found = problems(source)
        assert any(expected in line for line in found), (source, found)
    plain = ("from .. import gpus, validate\nfrom ..gpus import HOPPER_H100, SMLimits\nfrom .banks import warp_request\n"
             "def f(sm: SMLimits = HOPPER_H100):\n    return gpus.reference().sm_count + sm.max_threads_per_sm\n")
    assert problems(plain) == []


def test_every_model_is_scanned():
    names = {p.name for p in _model_files()}
    assert {"occupancy.py", "launch_summary.py", "nbody.py"} <= names
