"""Timing refuses to invent GPU numbers under the simulator; sweeps record invalid points."""

import math

import pytest

import labhelpers as lh
from labhelpers.sweep import grid_points, sweep
from labhelpers.timing import Timing
from markers import SIM, sim_only


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
