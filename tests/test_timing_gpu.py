"""``lh.benchmark`` on a real GPU: its held clock agrees with Nsight Compute, and is below the Python clock.

Under the simulator every test here is skipped (there is no GPU time to compare); the decisions of the held clock
(hold, retry, fall back) are tested on both backends with a fake GPU in tests/test_core_timing_sweep.py.
On a GPU::

    LABHELPERS_BACKEND=gpu python -m pytest -q tests/test_timing_gpu.py tests/test_roofline_stopwatch.py -rs

(``ncu`` must be on the PATH or in /usr/local/cuda/bin, with the counters readable; else the profiler test is
skipped and says why.)
"""

import functools
import statistics

import numpy as np
import pytest
from numba import cuda

import labhelpers as lh
from labhelpers import profiler, timing
from labhelpers.experiments import roofline_stopwatch as sx
from labhelpers.kernels import roofline_stopwatch as sw
from markers import SIM

pytestmark = pytest.mark.skipif(SIM, reason="needs a GPU: compares lh.benchmark's GPU time with Nsight Compute's "
                                            "gpu__time_duration and with the Python clock (run with "
                                            "LABHELPERS_BACKEND=gpu)")

#: About 50 µs of float32 copy on an H100 or H200 (128 MiB read + written).
N_50US = 2**24
THREADS = 256


def copy_launcher(n: int):
    x = cuda.to_device(np.ones(n, dtype=np.float32))
    out = cuda.device_array(n, dtype=np.float32)
    blocks = (n + THREADS - 1) // THREADS

    def launch():
        sw.copy[blocks, THREADS](x, out)

    return launch, out


#: About 200 µs of copy: where the held clock meets the profiler within 3% (+1.9% on the H200, ch07_stopwatch).
N_200US = 2**26
#: Issue 28's target size. The held clock reads 3.6-5 µs (+8%) above Nsight Compute there on the H200
#: (ch07_stopwatch: 52.2 against 48.4 µs), not yet explained: the profiler serialises each kernel and flushes the
#: caches around it, while a stream of copies may pay the previous kernel's write-back of its output from L2.
KNOWN_GAP = ("issue 28's 3% at ~50 µs is not met: the held clock reads ~8% above Nsight Compute at 2^24 on the "
             "H200 (ch07_stopwatch); when this passes, the gap is closed: remove this marker")


@functools.lru_cache(maxsize=None)
def _ncu_medians() -> tuple[dict[int, float], str]:
    """Nsight Compute's median gpu__time_duration of five copies at each size compared below, in ms, from one
    profiled child process (each costs seconds of start-up); or why the profiler cannot run."""
    reason = profiler.ncu_unavailable_reason()
    if reason:
        return {}, f"Nsight Compute cannot run: {reason}"
    try:
        times = sx.profiler_times_ms([N_200US, N_50US], threads=THREADS, launches=5)
    except profiler.ProfilerUnavailable as exc:
        return {}, str(exc)
    return {n: statistics.median(ms) for n, ms in times.items()}, ""


def ncu_median_ms(n: int) -> float:
    """Nsight Compute's median time of a copy of ``n`` floats, in ms (skips without ncu)."""
    medians, why_not = _ncu_medians()
    if why_not:
        pytest.skip(why_not)
    return medians[n]


@pytest.mark.parametrize("n, flush_l2", [
    (N_200US, False),
    (N_200US, True),
    pytest.param(N_50US, False, marks=pytest.mark.xfail(strict=True, reason=KNOWN_GAP)),  # the gap, shown once
])
def test_held_clock_agrees_with_nsight_compute_within_3_percent(n, flush_l2):
    ncu_ms = ncu_median_ms(n)
    launch, _ = copy_launcher(n)
    t = lh.benchmark(launch, repeat=50, flush_l2=flush_l2, nbytes=sw.copy_bytes(n), label=f"copy of {n}")
    assert t.clock == timing.CLOCK_HELD and not t.synchronises, t.note
    assert t.median_ms == pytest.approx(ncu_ms, rel=0.03), (
        f"lh.benchmark {t.median_ms * 1e3:.1f} µs against Nsight Compute {ncu_ms * 1e3:.1f} µs "
        f"({t.median_ms / ncu_ms - 1:+.1%}, flush_l2={flush_l2}): {t}")


def test_held_clock_is_below_the_python_clock_for_a_short_kernel():
    launch, _ = copy_launcher(2**20)
    held = lh.benchmark(launch, repeat=30)
    python = lh.benchmark(launch, repeat=30, clock="python")
    assert held.clock == timing.CLOCK_HELD and python.clock == timing.CLOCK_PYTHON
    assert held.median_ms < python.median_ms, f"held {held}\npython {python}"
    assert held.issue_ms > 0 and python.issue_ms > 0


def test_many_calls_per_pair_of_events_still_hold():
    launch, _ = copy_launcher(2**20)
    t = lh.benchmark(launch, repeat=10, number=50)
    assert t.clock == timing.CLOCK_HELD and not t.synchronises, t.note


def test_a_call_that_synchronises_is_named_and_timed_from_python():
    launch, out = copy_launcher(2**20)
    host = np.empty(2**20, dtype=np.float32)

    def launch_and_copy_back():
        launch()
        out.copy_to_host(host)

    t = lh.benchmark(launch_and_copy_back, repeat=5)
    assert t.clock == timing.CLOCK_PYTHON and t.synchronises and "synchronises" in t.note
    assert "could not be held" in str(t)


def test_a_cupy_call_is_held_too():
    cp = pytest.importorskip("cupy")
    x = cp.ones(2**22, dtype=cp.float32)
    t = lh.benchmark(lambda: cp.multiply(x, 2, out=x), repeat=10)
    assert t.clock == timing.CLOCK_HELD and not t.synchronises, t.note


def test_stopwatch_sweep_measures_every_clock_in_order():
    table = sx.stopwatch_sweep([2**16, 2**20], repeat=5, profile=False)
    assert list(table.columns) == list(sx.COLUMNS)
    ok = table[table["status"] == "ok"].set_index(["n", "clock"])["median_ms"]
    for n in (2**16, 2**20):
        assert ok[(n, sx.HELD_EVENTS)] < ok[(n, sx.PYTHON_EVENTS)]
    assert (table[table["clock"] == sx.PROFILER]["status"] == "unavailable").all()
