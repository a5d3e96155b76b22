"""Test configuration: the package tests run under Numba's CUDA simulator unless told otherwise.

``LABHELPERS_BACKEND=gpu python -m pytest tests`` runs them on a GPU. Tests of behaviour only one
backend has are marked with the shared markers of ``tests/markers.py`` (``from markers import sim_only,
gpu_only``), re-exported here.
"""

import os

os.environ.setdefault("LABHELPERS_BACKEND", "sim")
# On a machine with several GPUs, tools/run_gpu_tests.sh sets LABHELPERS_GPU_LANES: each pytest-xdist worker then sees
# one GPU of its own (worker gwN gets GPU N mod lanes), set before anything initialises CUDA.
_lanes = int(os.environ.get("LABHELPERS_GPU_LANES", "0") or 0)
_worker = os.environ.get("PYTEST_XDIST_WORKER", "")
if _lanes > 1 and _worker.startswith("gw"):
    os.environ["CUDA_VISIBLE_DEVICES"] = str(int(_worker[2:]) % _lanes)
os.environ.setdefault("MPLBACKEND", "Agg")

from markers import SIM, gpu_only, sim_only  # noqa: E402,F401  (after the backend is chosen)

import contextlib  # noqa: E402
from pathlib import Path  # noqa: E402

import pytest  # noqa: E402

from labhelpers import gpu_lock  # noqa: E402


#: The GPU suite's first phase (tools/run_gpu_tests.sh): tests run side by side, and one that takes a GPU
#: measurement is skipped there, its id written to this file, and run again alone in the second phase.
DEFER = os.environ.get("LABHELPERS_GPU_DEFER")
#: The second phase: only the tests listed in this file run (one process, the GPU to itself).
ONLY = os.environ.get("LABHELPERS_GPU_ONLY")


@pytest.fixture(autouse=True)
def _gpu_measurements_run_alone(request, monkeypatch):
    """A measurement that a test judges never shares the GPU with another test process. In the GPU suite's
    parallel phase (``LABHELPERS_GPU_DEFER`` set) the first measurement of a test (anything that would take
    ``labhelpers.gpu_lock.exclusive``: ``lh.benchmark``, chapter 11's event timings) skips the test and queues it for
    the serial phase, unless the test is marked ``judges_no_timing`` (what it asserts no busy GPU can change). Where
    several processes share a GPU otherwise (``LABHELPERS_GPU_LOCK``), each test holds it shared and measurements
    wait for a quiet GPU. Both are no-ops in CI and in a plain ``pytest`` run."""
    def queue_for_the_serial_phase():
        with open(DEFER, "a") as queue:
            queue.write(request.node.nodeid + "\n")
        pytest.skip("takes a GPU measurement: runs in the serial phase, alone on the GPU")

    if DEFER and request.node.get_closest_marker("measures"):  # all it does is time: queued before any work
        queue_for_the_serial_phase()
    if DEFER and not request.node.get_closest_marker("judges_no_timing"):
        @contextlib.contextmanager
        def deferred():
            queue_for_the_serial_phase()
            yield

        monkeypatch.setattr(gpu_lock, "exclusive", deferred)
    with gpu_lock.shared():
        yield


def pytest_collection_modifyitems(config, items):
    """The serial phase runs only the tests the parallel phase deferred."""
    if not ONLY:
        return
    wanted = set(Path(ONLY).read_text().splitlines())
    keep = [item for item in items if item.nodeid in wanted]
    config.hook.pytest_deselected(items=[item for item in items if item.nodeid not in wanted])
    items[:] = keep


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "measures: a test whose work is mostly GPU timing; the GPU suite's parallel phase queues it for the "
                   "serial phase before it starts, instead of at its first measurement")
    config.addinivalue_line(
        "markers", "judges_no_timing: a test that takes GPU measurements but asserts nothing a busy GPU could change "
                   "(a table's columns, variants and correctness, labels, times above zero); the GPU suite keeps it in "
                   "its parallel phase")
    config.addinivalue_line(
        "markers", "backend_independent: the module's tests launch no kernel and measure nothing, so they give the same "
                   "verdict on every backend; tools/run_gpu_tests.sh leaves them to CI (the simulator run proves the "
                   "mark: a kernel launched by such a test fails it)")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    """A test marked backend_independent that launches a kernel fails: the GPU suite would skip what it checks."""
    if item.get_closest_marker("backend_independent") is None:
        yield
        return
    from labhelpers import launchguard

    launched = []

    def hook(kernel, configuration, args):
        launched.append(getattr(getattr(kernel, "py_func", kernel), "__name__", repr(kernel)))

    launchguard.add_launch_hook(hook)
    try:
        outcome = yield
    finally:
        launchguard.remove_launch_hook(hook)
    if launched and outcome.excinfo is None:
        pytest.fail(f"{item.nodeid} is marked backend_independent but launched the kernel {launched[0]!r}: remove "
                    "`pytestmark = pytest.mark.backend_independent` from its module, or move the test, so that the "
                    "GPU suite runs it.", pytrace=False)
