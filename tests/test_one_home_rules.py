"""One home per job, checked on the package's source (read with ``ast`` and ``tokenize``, never imported).

* The GPU-only guard: only ``backend.py`` builds a :class:`~labhelpers.errors.GPUOnlyError`; everything else calls
  ``backend.require_gpu(what, because=..., instead=..., needs_cupy=...)``, so every "needs a GPU" message has one
  shape. The few places that still build one are listed in :data:`HAND_RAISES_ALLOWED`, each with its reason.
* Launch geometry: no hand ceiling division ``-(-a // b)`` for a launch grid. The ones left in the package say on
  their line that they are "not launch geometry" (or a notebook shows their source: ``SHOWN_IN_THE_BOOK`` of
  ``tests/test_launch_geometry.py``, which also caps how many are left).
* Launch limits: ``validate.py`` is the one home of "is this launch allowed on this GPU, does it fit". Only it
  asks the device for its launch limits, and nothing else calls the device's limits to check a launch.
* Device arrays: ``arrays.to_device`` is the one helper (there is no ``as_device``).
"""

from __future__ import annotations

import ast
from pathlib import Path

import labhelpers  # noqa: F401  (first: chooses the simulator before numba.cuda is imported)
import pytest

from test_launch_geometry import SHOWN_IN_THE_BOOK, _all_ceiling_divisions, _ceiling_divisions

pytestmark = pytest.mark.backend_independent  # no kernel, no measurement: CI runs it (see conftest.py)

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "labhelpers"

#: The one module that builds a GPUOnlyError: the guard itself.
GUARD_MODULE = "backend.py"
#: Modules whose every GPUOnlyError is allowed, and why.
MODULES_ALLOWED = {
    "racecheck.py": "the race detector's own errors say how to check a kernel instead (owned by the racecheck work)",
    "racecheck_gpu.py": "the race detector's simulator subprocess on a GPU: why it could not rebuild the kernel",
}
#: (module, enclosing function) -> why that function still builds a GPUOnlyError by hand.
HAND_RAISES_ALLOWED = {
    ("kernels/streams.py", "issue"): "chapter 11 shows StreamPipeline.issue's source (lh.show_source): a changed "
                                     "line changes the chapter's committed output",
    ("kernels/streams.py", "copy_async"): "chapter 11 shows copy_async's source (lh.show_source)",
    ("kernels/reduction.py", "run_last_warp_unsafe"): "chapter 6 prints this message (committed output)",
    ("kernels/scheduling.py", "warp_sums"): "chapter 4 prints this message (committed output)",
    ("timing.py", "_no_timing"): "a Timing that is not a GPU timing (the simulator's or a host clock's), asked for "
                                 "a GPU-only field: about the timing, not about this machine",
    ("experiments/memory.py", "device_properties"): "about the DeviceInfo passed in (a simulator's), not this machine",
    ("experiments/multi_gpu.py", "_check_devices"): "how many GPUs, not whether: the message names the count",
    ("experiments/multi_gpu.py", "require_devices"): "how many GPUs, not whether: the message names the count",
    ("experiments/multi_gpu.py", "_nccl"): "NCCL missing from CuPy on a GPU machine (what to install)",
    ("experiments/scan.py", "cub_scan"): "CUB missing from CuPy on a GPU machine",
    ("experiments/consistency.py", "racecheck_report"): "compute-sanitizer missing on a GPU machine",
    ("experiments/stencil.py", "racecheck_table"): "compute-sanitizer missing on a GPU machine",
    ("roofline/points.py", "record_point"): "a timing that is not a GPU timing (chapter 7 prints the message)",
    ("roofline/points.py", "measure"): "nothing recorded on this GPU yet: the signal live_or_reference falls back "
                                       "on, not a guard",
    ("roofline/ceilings.py", "measure"): "nothing measured on this GPU yet: the signal live_or_reference falls "
                                         "back on, not a guard",
}
#: DeviceInfo fields that are launch limits: only the one launch-check home reads them to check a launch.
LAUNCH_LIMIT_FIELDS = ("max_shared_per_block", "max_shared_per_block_optin", "max_threads_per_block",
                       "max_block_dim_x", "max_block_dim_y", "max_block_dim_z")
LAUNCH_CHECK_HOME = "validate.py"
#: Modules that read those fields for another job than checking a launch, and which job.
LIMIT_READERS_ALLOWED = {
    "device.py": "reads them from the driver (the hardware description)",
    "gpus.py": "the hardware description of known GPUs",
    "experiments/memory.py": "a table of the device's properties for chapter 3",
    "models/occupancy.py": "the occupancy model checks a block against the SM it is given (a model, not a launch)",
    "experiments/scheduling.py": "compare_with_driver: the compiled kernel's own thread limit, the driver's answer",
}


def _modules() -> list[tuple[str, ast.Module]]:
    return [(path.relative_to(PACKAGE).as_posix(), ast.parse(path.read_text(), filename=str(path)))
            for path in sorted(PACKAGE.rglob("*.py"))]


def _gpu_only_errors_built(tree: ast.Module) -> list[tuple[int, str]]:
    """``(line, enclosing function)`` of every ``GPUOnlyError(...)`` built (raised or returned) in ``tree``."""
    found = []

    def visit(node: ast.AST, function: str) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            function = node.name
        if isinstance(node, ast.Call):
            callee = node.func
            name = callee.id if isinstance(callee, ast.Name) else getattr(callee, "attr", None)
            if name == "GPUOnlyError":
                found.append((node.lineno, function))
        for child in ast.iter_child_nodes(node):
            visit(child, function)

    visit(tree, "<module>")
    return found


def _hand_raises() -> list[tuple[str, int, str]]:
    return [(module, line, function) for module, tree in _modules() if module != GUARD_MODULE
            and module not in MODULES_ALLOWED for line, function in _gpu_only_errors_built(tree)]


def test_no_module_outside_backend_raises_gpu_only_error_by_hand():
    bare = [f"src/labhelpers/{module}:{line} (in {function})" for module, line, function in _hand_raises()
            if (module, function) not in HAND_RAISES_ALLOWED]
    assert not bare, ("GPUOnlyError built by hand: call labhelpers.backend.require_gpu(what, because=..., "
                      "instead=..., needs_cupy=...) instead (the one guard and message shape):\n" + "\n".join(bare))


def test_the_allowed_hand_raises_are_still_there():
    """An allowed exception that is gone (moved to require_gpu) leaves the list, so the list stays true."""
    present = {(module, function) for module, _, function in _hand_raises()}
    stale = sorted(set(HAND_RAISES_ALLOWED) - present)
    assert not stale, f"no longer raised by hand: remove from HAND_RAISES_ALLOWED: {stale}"
    for module in MODULES_ALLOWED:
        assert (PACKAGE / module).exists(), module


def test_the_finder_sees_gpu_only_errors_built_by_hand():
    tree = ast.parse("from .errors import GPUOnlyError\nfrom . import errors\n\n"
                     "def f():\n    raise GPUOnlyError('no GPU')\n\n"
                     "def g():\n    return errors.GPUOnlyError('no GPU')\n\n"
                     "def h():\n    backend.require_gpu('h')\n    try:\n        pass\n"
                     "    except GPUOnlyError:\n        pass\n")
    assert _gpu_only_errors_built(tree) == [(5, "f"), (8, "g")]


def test_the_guard_has_no_wrappers_left():
    """No module defines its own ``require_gpu``-like wrapper: they call backend.require_gpu directly."""
    wrappers = [f"src/labhelpers/{module}: def {node.name}" for module, tree in _modules() if module != GUARD_MODULE
                for node in ast.walk(tree) if isinstance(node, ast.FunctionDef)
                and node.name.lstrip("_").startswith("require_gpu")]
    assert not wrappers, wrappers


def test_a_hand_ceiling_division_for_a_grid_is_rejected_and_a_commented_one_accepted():
    bare = [(row, commented) for row, _, commented in
            _ceiling_divisions("kernel[-(-n // threads), threads](x)\n")]
    assert bare == [(1, False)]
    commented = _ceiling_divisions("rows = -(-total // per_row)  # not launch geometry: rows of the drawing\n")
    assert [c for _, _, c in commented] == [True]


def test_every_hand_ceiling_division_left_says_it_is_not_launch_geometry():
    """A ceiling division left in the package says "not launch geometry" on its line (any other comment, e.g.
    "ceiling division: ...", is what a grid would say), unless a chapter shows its source."""
    lines = {}
    for module, row, code, _ in _all_ceiling_divisions():
        text = (PACKAGE / module).read_text().splitlines()
        lines[(module, row, code)] = text[row - 1]
    wrong = [f"src/labhelpers/{module}:{row}: {line.strip()}" for (module, row, code), line in lines.items()
             if "not launch geometry" not in line and (module, code) not in SHOWN_IN_THE_BOOK]
    assert not wrong, ("use labhelpers.launch.blocks_for / tiles_for / warps_for for a grid, or say on the line "
                       "that it is not launch geometry:\n" + "\n".join(wrong))


def _reads_launch_limits(tree: ast.Module) -> list[int]:
    """Lines that read a DeviceInfo launch-limit field (``info.max_shared_per_block``, ``p.get("...")``)."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in LAUNCH_LIMIT_FIELDS and isinstance(node.ctx, ast.Load):
            found.append(node.lineno)
        elif isinstance(node, ast.Constant) and node.value in LAUNCH_LIMIT_FIELDS:
            found.append(node.lineno)
    return found


def test_only_the_launch_check_home_reads_the_devices_launch_limits():
    readers = {module: lines for module, tree in _modules() if (lines := _reads_launch_limits(tree))}
    assert LAUNCH_CHECK_HOME in readers, "validate.max_dynamic_shared reads the device's shared-memory limit"
    strays = [f"src/labhelpers/{module}:{lines[0]}" for module, lines in readers.items()
              if module != LAUNCH_CHECK_HOME and module not in LIMIT_READERS_ALLOWED]
    assert not strays, ("a launch check reads the device's limits outside validate.py: use validate.launch / "
                        "validate.check_launch / validate.max_dynamic_shared:\n" + "\n".join(strays))


def test_only_the_launch_check_home_defines_launch_checks():
    """``check_launch``, ``launch``, ``block_shape``, ``grid_shape``, ``threads_per_block`` and the device's limit
    are defined once, in validate.py; launchguard applies validate.launch at every launch and defines no check."""
    names = {"check_launch", "check_configuration", "block_shape", "grid_shape", "threads_per_block",
             "max_dynamic_shared", "_max_shared"}
    defined = {(module, node.name) for module, tree in _modules() for node in tree.body
               if isinstance(node, ast.FunctionDef) and node.name in names}
    assert {name for module, name in defined if module != LAUNCH_CHECK_HOME} == set(), defined
    assert {name for module, name in defined} == names - {"check_configuration", "_max_shared"}


def test_one_device_array_helper():
    defined = [(module, node.name) for module, tree in _modules() for node in tree.body
               if isinstance(node, ast.FunctionDef) and node.name in ("to_device", "as_device")]
    assert defined == [("arrays.py", "to_device")]
