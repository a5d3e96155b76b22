"""labhelpers.gpu_lock: several processes share a GPU, and a measurement never overlaps another process's test.

Four "test" processes hold the lock shared in a loop; two others, each inside a shared hold as a test would be,
take it exclusively to "measure". Every interval is logged with its start and end: no exclusive interval may
overlap any other interval, nobody deadlocks, and nothing happens without the variable.
"""

from __future__ import annotations

import multiprocessing as mp
import time

import pytest

from labhelpers import gpu_lock

pytestmark = pytest.mark.backend_independent  # no kernel, no measurement: CI runs it (see conftest.py)


def _test_process(path, log, who):
    import os
    os.environ[gpu_lock.ENV] = path
    for _ in range(15):
        with gpu_lock.shared():
            t0 = time.monotonic(); time.sleep(0.004); log.put(("shared", who, t0, time.monotonic()))


def _measuring_process(path, log, who):
    import os
    os.environ[gpu_lock.ENV] = path
    for _ in range(4):
        with gpu_lock.shared():
            time.sleep(0.002)
            with gpu_lock.exclusive():
                with gpu_lock.exclusive():  # nested (a benchmark inside a measured race): taken once
                    t0 = time.monotonic(); time.sleep(0.01); log.put(("exclusive", who, t0, time.monotonic()))
            time.sleep(0.002)


def test_measurements_never_overlap_another_process(tmp_path):
    ctx = mp.get_context("fork")  # children touch no GPU: fork is safe and fast
    log = ctx.Queue()
    path = str(tmp_path / "gpu.lock")
    procs = [ctx.Process(target=_test_process, args=(path, log, f"t{i}")) for i in range(4)]
    procs += [ctx.Process(target=_measuring_process, args=(path, log, f"m{i}")) for i in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=60)
    assert [p.exitcode for p in procs] == [0] * len(procs), "a process failed or deadlocked"
    events = [log.get(timeout=5) for _ in range(4 * 15 + 2 * 4)]
    for kind, who, t0, t1 in events:
        if kind != "exclusive":
            continue
        for other in events:
            if other[1] != who and other[2] < t1 and t0 < other[3]:
                pytest.fail(f"{who}'s measurement overlapped {other[1]}'s {other[0]} interval")


def test_without_the_variable_nothing_is_locked(monkeypatch):
    monkeypatch.delenv(gpu_lock.ENV, raising=False)
    assert not gpu_lock.enabled()
    with gpu_lock.shared(), gpu_lock.exclusive():
        pass
    assert gpu_lock.measurement(lambda x: x + 1)(1) == 2


def test_enabled_follows_the_variable(monkeypatch):
    monkeypatch.setenv(gpu_lock.ENV, "/tmp/some.lock")
    assert gpu_lock.enabled()
    monkeypatch.setenv(gpu_lock.ENV, "")
    assert not gpu_lock.enabled()


def test_takes_a_measurement():
    """Stands for any test that times the GPU (lh.benchmark takes gpu_lock.exclusive): what the next test defers."""
    with gpu_lock.exclusive():
        pass


@pytest.mark.measures
def test_marked_as_measuring():
    """Stands for a test marked ``measures``: the next test's side-by-side phase queues it before it starts."""


@pytest.mark.judges_no_timing
def test_measures_but_judges_no_timing():
    """Stands for a test that measures but asserts nothing a busy GPU could change: it stays side by side."""
    with gpu_lock.exclusive():
        pass


def test_the_gpu_suite_defers_a_measuring_test_then_runs_it_alone(tmp_path):
    """tools/run_gpu_tests.sh's two phases (tests/conftest.py): side by side the measuring test is skipped and its id
    queued (not one marked judges_no_timing); alone, only the queued tests run."""
    import os
    import subprocess
    import sys

    node = "tests/test_gpu_lock.py::test_takes_a_measurement"
    marked = "tests/test_gpu_lock.py::test_marked_as_measuring"
    other = "tests/test_gpu_lock.py::test_enabled_follows_the_variable"
    unjudged = "tests/test_gpu_lock.py::test_measures_but_judges_no_timing"
    queue = tmp_path / "deferred"
    env = {k: v for k, v in os.environ.items() if not k.startswith("LABHELPERS_GPU_")}
    root = str(__import__("pathlib").Path(__file__).parents[1])

    def pytest_run(**extra):
        return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist", "-rs",
                               node, marked, other, unjudged], cwd=root, env={**env, **extra}, capture_output=True, text=True, timeout=120)

    side_by_side = pytest_run(LABHELPERS_GPU_DEFER=str(queue))
    assert "2 passed, 2 skipped" in side_by_side.stdout and "serial phase" in side_by_side.stdout, side_by_side.stdout
    assert sorted(queue.read_text().split()) == sorted([node, marked])
    alone = pytest_run(LABHELPERS_GPU_ONLY=str(queue))
    assert "2 passed, 2 deselected" in alone.stdout, alone.stdout
