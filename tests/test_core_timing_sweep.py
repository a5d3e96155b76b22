"""Timing refuses to invent GPU numbers under the simulator; the held clock's decisions; sweeps record invalid points.

The hold/retry/fallback logic of ``lh.benchmark`` runs here against :class:`FakeGPU`, a GPU timeline with a host
clock (launches queue in order; each call costs the host its issue time), so it is tested on both backends; the
real GPU's agreement with Nsight Compute is in ``tests/test_timing_gpu.py``.
"""

import math

import numpy as np
import pytest

import labhelpers as lh
from labhelpers.sweep import grid_points, sweep
from labhelpers import timing, timing_kernels
from labhelpers.timing import HoldPolicy, Timing, time_repetitions
from markers import SIM, sim_only


def test_fill_kernel_fills_any_size_with_a_small_grid():
    buf = lh.to_device(np.zeros(1000, dtype=np.float32))
    timing_kernels.fill[2, 64](buf, np.float32(3.0))
    assert (lh.to_host(buf) == 3.0).all()


def test_sleep_steps():
    tk = timing_kernels
    assert tk.sleep_steps(0.0) == 1 and tk.sleep_steps(1.0) == 1_000_000 // tk.SLEEP_STEP_NS
    assert tk.sleep_steps(0.015) == 2  # rounded up: never shorter than asked


@sim_only
def test_benchmark_runs_once_and_reports_no_number_in_the_simulator():
    calls = []
    t = lh.benchmark(lambda: calls.append(1), nbytes=100, label="work")
    assert calls == [1]
    assert not t.is_gpu_timing
    assert "no GPU timing" in str(t)
    with pytest.raises(lh.GPUOnlyError, match="simulator"):
        _ = t.gbps
    assert math.isnan(t.as_row()["gbps"])


def test_benchmark_refuses_an_unknown_clock_on_both_backends():
    with pytest.raises(lh.ArgumentError, match="clock"):
        lh.benchmark(lambda: None, clock="wall")


def test_timing_statistics_and_rates():
    t = Timing(label="k", times_ms=(1.0, 2.0, 2.0, 3.0, 10.0), nbytes=2 * 10**9, flops=10**9)
    assert t.median_ms == 2.0 and t.min_ms == 1.0
    assert t.gbps == pytest.approx(1000.0)
    assert t.gflops == pytest.approx(500.0)
    assert 0 < t.spread
    assert "1,000.0 GB/s" in str(t)


def test_rates_need_stated_work():
    t = Timing(label="k", times_ms=(1.0,))
    with pytest.raises(ValueError, match="nbytes"):
        _ = t.gbps


def test_timing_names_its_clock_and_reports_issue_cost_beside_it():
    held = Timing(label="k", times_ms=(0.05, 0.05), nbytes=10**6, issue_ms=0.03)
    assert held.clock == timing.CLOCK_HELD and held.is_gpu_timing and not held.includes_launch_cost
    assert "stream held" in str(held) and "host issue 0.03 ms per call" in str(held)
    assert held.as_row()["issue_ms"] == 0.03 and held.as_row()["median_ms"] == 0.05
    python = Timing(label="k", times_ms=(0.08,), clock=timing.CLOCK_PYTHON, synchronises=True, note="why")
    assert python.is_gpu_timing and python.includes_launch_cost
    assert "launch cost included" in str(python) and "note: why" in str(python)
    assert Timing(label="old", times_ms=(1.0,), clock="cuda-events").is_gpu_timing  # tables collected before
    assert math.isnan(Timing(label="k", times_ms=(1.0,)).as_row()["issue_ms"])
    assert math.isnan(Timing(label="k", times_ms=None).as_row()["issue_ms"])


class FakeGPU:
    """A GPU's timeline and the host's clock, in ms, behind the :class:`labhelpers.timing.StreamOps` interface.

    Work queues in order on one stream: it starts when both the host has issued it and the GPU is free. An event
    completes when the GPU reaches it. A kernel call costs the host ``issue_ms`` and the GPU ``kernel_ms``.
    """

    def __init__(self, issue_ms: float = 0.03, kernel_ms: float = 0.05):
        self.issue_ms, self.kernel_ms = issue_ms, kernel_ms
        self.host = 0.0  # the host's clock
        self.free_at = 0.0  # when the GPU has finished everything queued
        self.sleeps: list[float] = []
        self.flushes = 0

    def _queue(self, ms: float) -> None:
        self.free_at = max(self.host, self.free_at) + ms

    def now(self) -> float:
        return self.host / 1e3

    def hold(self, ms: float) -> None:
        self.sleeps.append(ms)
        self._queue(ms)
        self.host += 0.005

    def flush(self) -> None:
        self.flushes += 1
        self._queue(0.2)

    def record(self) -> float:
        return max(self.host, self.free_at)  # the GPU reaches the event once the work before it is done

    def has_completed(self, event: float) -> bool:
        return self.host >= event

    def elapsed_ms(self, start: float, end: float) -> float:
        self.host = max(self.host, end)
        return end - start

    def synchronize(self) -> None:
        self.host = max(self.host, self.free_at)

    def kernel(self) -> None:
        """A launch: the host spends its issue time, then the kernel is queued."""
        self.host += self.issue_ms
        self._queue(self.kernel_ms)

    def synchronising_call(self) -> None:
        """A launch followed by a copy to the host: the host waits until the GPU is done."""
        self.kernel()
        self.synchronize()


def test_held_stream_times_the_kernel_only_and_measures_issue_beside_it():
    gpu = FakeGPU(issue_ms=0.03, kernel_ms=0.05)
    reps = time_repetitions(gpu.kernel, gpu, repeat=5, number=1, issue_estimate_ms=0.03)
    assert reps.clock == timing.CLOCK_HELD and not reps.synchronises and reps.note == ""
    assert reps.times_ms == pytest.approx([0.05] * 5)  # the kernel, not the launch
    assert reps.issue_ms == pytest.approx([0.03] * 5)  # the launch, on its own
    assert len(gpu.sleeps) == 5 and all(s >= 2 * 0.03 for s in gpu.sleeps)


def test_python_clock_includes_the_launch_and_number_does_not_cure_short_kernels():
    gpu = FakeGPU(issue_ms=0.03, kernel_ms=0.05)
    one = time_repetitions(gpu.kernel, gpu, repeat=3, number=1, clock=timing.CLOCK_PYTHON)
    assert one.clock == timing.CLOCK_PYTHON and one.times_ms == pytest.approx([0.08] * 3)  # launch + kernel
    short = FakeGPU(issue_ms=0.03, kernel_ms=0.005)
    python = time_repetitions(short.kernel, short, repeat=3, number=20, clock=timing.CLOCK_PYTHON)
    held = time_repetitions(short.kernel, short, repeat=3, number=20, issue_estimate_ms=0.03)
    assert python.times_ms[0] == pytest.approx(0.03 + 0.005 / 20)  # issue-bound: the GPU waits for Python
    assert held.clock == timing.CLOCK_HELD and held.times_ms == pytest.approx([0.005] * 3)


def test_a_hold_broken_once_is_retried_longer_and_then_kept():
    gpu = FakeGPU(issue_ms=0.03, kernel_ms=0.05)
    policy = HoldPolicy(factor=2.0, margin_ms=0.0, min_ms=0.1, max_ms=100.0)
    reps = time_repetitions(gpu.kernel, gpu, repeat=4, number=20, issue_estimate_ms=0.001, policy=policy)
    assert reps.clock == timing.CLOCK_HELD and not reps.synchronises
    assert reps.times_ms == pytest.approx([0.05] * 4)
    assert len(gpu.sleeps) == 5  # one repetition ran twice
    assert gpu.sleeps[0] < 20 * 0.03 < gpu.sleeps[1]  # the first sleep ended before the calls were queued
    assert gpu.sleeps[2:] == [gpu.sleeps[1]] * 3  # later repetitions keep the sleep that held


def test_work_that_synchronises_falls_back_to_the_python_clock_and_says_so():
    gpu = FakeGPU(issue_ms=0.03, kernel_ms=0.05)
    reps = time_repetitions(gpu.synchronising_call, gpu, repeat=3, number=2, issue_estimate_ms=0.03)
    assert reps.clock == timing.CLOCK_PYTHON and reps.synchronises
    assert "synchronises" in reps.note and "from Python" in reps.note
    assert len(reps.times_ms) == 3 and len(gpu.sleeps) == 2  # tried twice, then timed from Python
    assert reps.times_ms == pytest.approx([0.08] * 3)


def test_issue_slower_than_the_longest_hold_is_not_called_synchronising():
    gpu = FakeGPU(issue_ms=0.1, kernel_ms=0.05)
    policy = HoldPolicy(max_ms=1.0)
    reps = time_repetitions(gpu.kernel, gpu, repeat=2, number=50, issue_estimate_ms=0.1, policy=policy)
    assert reps.clock == timing.CLOCK_PYTHON and not reps.synchronises
    assert "longer than the longest hold" in reps.note


def test_flush_runs_before_each_repetition_outside_the_timed_interval():
    for clock in (timing.CLOCK_HELD, timing.CLOCK_PYTHON):
        gpu = FakeGPU(issue_ms=0.03, kernel_ms=0.05)
        plain = time_repetitions(gpu.kernel, gpu, repeat=3, clock=clock, issue_estimate_ms=0.03)
        flushed = time_repetitions(gpu.kernel, gpu, repeat=3, clock=clock, flush=True, issue_estimate_ms=0.03)
        assert gpu.flushes == 3 and flushed.times_ms == pytest.approx(plain.times_ms)


def test_wall_time_measures_the_host():
    t = lh.wall_time(lambda: sum(range(1000)), repeat=3)
    assert t.clock == "host-clock" and not t.is_gpu_timing and t.median_ms >= 0


def test_grid_points_product_and_validation():
    assert grid_points({"a": [1, 2], "b": ["x"]}) == [{"a": 1, "b": "x"}, {"a": 2, "b": "x"}]
    with pytest.raises(ValueError):
        grid_points({})
    with pytest.raises(ValueError, match="list of values"):
        grid_points({"a": 3})


def test_sweep_marks_invalid_and_simulated_points():
    def run(threads):
        if threads == 999:
            raise lh.LaunchConfigError("not a valid size")
        return lh.benchmark(lambda: None, nbytes=4)

    table = sweep(run, {"threads": [32, 2048, 999]}, check=lambda threads: lh.check_launch(threads), progress=False)
    assert list(table["status"]) == ["simulator" if SIM else "ok", "invalid", "invalid"]
    assert "exceeds the limit" in table.loc[1, "reason"]
    assert table.loc[2, "reason"] == "not a valid size"
    assert {"median_ms", "gbps", "gflops", "threads"} <= set(table.columns)


def test_default_number_queues_about_a_millisecond_of_work_per_repetition():
    """Two events around one 50 µs call add a few µs of their own (+11% measured on an H200): ~1 ms per pair."""
    policy = timing.HoldPolicy()
    assert policy.calls_per_repetition(0.05) == 20        # 20 x 50 µs = 1 ms between the two events
    assert policy.calls_per_repetition(0.0074) == 100     # capped: the driver's launch queue is finite
    assert policy.calls_per_repetition(2.0) == 1          # long work: one call
    assert policy.calls_per_repetition(0.0) == 1          # nothing measured: one call
    assert policy.calls_per_repetition(float("nan")) == 1
