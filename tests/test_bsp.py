"""Chapter "BSP and Amdahl": the laws, the kernels (under the simulator), the summaries and the lab checkers."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

import labhelpers as lh
from labhelpers.exercises import bsp as ex
from labhelpers.experiments import bsp as bsp_exp
from labhelpers.kernels import bsp
from labhelpers.models import amdahl
from markers import sim_only
from mutants import lab_skeletons, load_solutions, mutant

from numba import cuda  # noqa: E402  (after labhelpers: it picks the simulator)


# --------------------------------------------------------------------------- models
def test_amdahl_known_values():
    assert float(amdahl.amdahl_speedup(0.1, 10)) == pytest.approx(1 / 0.19)
    assert float(amdahl.amdahl_speedup(0.0, 132)) == pytest.approx(132)
    assert float(amdahl.amdahl_speedup(1.0, 132)) == pytest.approx(1)
    assert float(amdahl.amdahl_speedup(0.1, 1e12)) == pytest.approx(10, rel=1e-9)
    np.testing.assert_allclose(amdahl.amdahl_speedup([0.0, 0.5], [4, 4]), [4, 1.6])
    assert float(amdahl.max_speedup(0.1)) == pytest.approx(10)  # the seed notes' example: p = 0.9
    assert math.isinf(float(amdahl.max_speedup(0.0)))


def test_gustafson_and_efficiency():
    assert float(amdahl.gustafson_speedup(0.1, 10)) == pytest.approx(9.1)
    assert float(amdahl.gustafson_speedup(0.0, 132)) == pytest.approx(132)
    assert float(amdahl.efficiency(66.0, 132)) == pytest.approx(0.5)


def test_processors_for_speedup_inverts_amdahl():
    assert float(amdahl.processors_for_speedup(0.1, 5)) == pytest.approx(9)
    assert float(amdahl.processors_for_speedup(0.0, 100)) == pytest.approx(100)
    assert math.isinf(float(amdahl.processors_for_speedup(0.1, 10)))
    assert math.isinf(float(amdahl.processors_for_speedup(0.1, 20)))
    for s, target in [(0.05, 10), (0.02, 49), (0.3, 1.0)]:
        n = float(amdahl.processors_for_speedup(s, target))
        assert float(amdahl.amdahl_speedup(s, n)) == pytest.approx(target)


def test_karp_flatt_and_fit_recover_the_serial_fraction():
    n = np.array([1, 2, 4, 8, 16, 32, 64, 128, 132], dtype=float)
    for s in (0.0, 0.004, 0.1, 0.5):
        speedup = amdahl.amdahl_speedup(s, n)
        assert amdahl.fit_serial_fraction(n, speedup) == pytest.approx(s, abs=1e-12)
        np.testing.assert_allclose(amdahl.karp_flatt(speedup[1:], n[1:]), s, atol=1e-12)
    # superlinear speedups clip to 0; a noisy fit stays close
    assert amdahl.fit_serial_fraction([1, 2, 4], [1, 2.2, 4.5]) == 0.0
    noisy = amdahl.amdahl_speedup(0.05, n) * (1 + 0.01 * np.sin(n))
    assert amdahl.fit_serial_fraction(n, noisy) == pytest.approx(0.05, rel=0.1)


def test_bsp_costs():
    assert float(amdahl.bsp_superstep_cost(100, 10, 4, 50)) == 190
    assert amdahl.bsp_program_cost([(100, 10), (5, 0)], g=4, l=50) == 190 + 55
    np.testing.assert_allclose(amdahl.bsp_superstep_cost([1, 2], 0, 1, 0), [1, 2])


@pytest.mark.parametrize("call, match", [
    (lambda: amdahl.amdahl_speedup(1.5, 4), r"\[0, 1\]"),
    (lambda: amdahl.amdahl_speedup(-0.1, 4), r"\[0, 1\]"),
    (lambda: amdahl.amdahl_speedup(float("nan"), 4), "NaN"),
    (lambda: amdahl.amdahl_speedup(0.1, 0), "at least 1"),
    (lambda: amdahl.gustafson_speedup(0.1, 0.5), "at least 1"),
    (lambda: amdahl.max_speedup(2), r"\[0, 1\]"),
    (lambda: amdahl.processors_for_speedup(0.1, 0.5), "below 1"),
    (lambda: amdahl.karp_flatt(2.0, 1), "n > 1"),
    (lambda: amdahl.karp_flatt(0.0, 4), "positive"),
    (lambda: amdahl.fit_serial_fraction([2], [1.8]), "at least two"),
    (lambda: amdahl.fit_serial_fraction([1, 2], [1, 2, 3]), "at least two"),
    (lambda: amdahl.fit_serial_fraction([1, 2], [1, float("nan")]), "NaN"),
    (lambda: amdahl.fit_serial_fraction([1, 2], [1, -2]), "positive"),
    (lambda: amdahl.fit_serial_fraction([1, 1], [1, 1]), "n > 1"),
    (lambda: amdahl.bsp_superstep_cost(-1, 0, 1, 1), "negative"),
    (lambda: amdahl.bsp_program_cost([], 1, 1), "at least one superstep"),
])
def test_models_reject_meaningless_input(call, match):
    with pytest.raises(ValueError, match=match):
        call()


# --------------------------------------------------------------------------- kernels
@pytest.mark.parametrize("n", [1, 31, 257, 1003])
def test_fixed_work_matches_numpy_on_any_grid(n):
    x = np.random.default_rng(n).random(n, dtype=np.float32)
    want = bsp.fixed_work_reference(x, reps=5)
    for blocks, threads in [(1, 32), (3, 33), (9, 128)]:  # fewer threads than elements, more, odd block size
        got = bsp.run_fixed_work(x, blocks, threads, reps=5)
        np.testing.assert_allclose(got, want, rtol=1e-6, err_msg=f"grid {blocks} x {threads}")
    np.testing.assert_array_equal(bsp.run_fixed_work(x, 2, 32, reps=0), x)  # zero steps: a copy


@pytest.mark.parametrize("n", [1, 127, 129, 1001])
def test_normalize_in_supersteps(n):
    x = np.random.default_rng(n).random(n, dtype=np.float32) + np.float32(0.1)
    y, supersteps = bsp.normalize(x)
    np.testing.assert_allclose(y, x / x.sum(dtype=np.float64), rtol=1e-5)
    assert supersteps == (2 if n <= bsp.SUM_THREADS else 3)


def test_block_sums_pads_the_last_block_with_zeros():
    x = np.arange(1, 301, dtype=np.float32)  # 300 = 2 full blocks of 128 and one of 44
    partial = np.zeros(3, dtype=np.float32)
    bsp.block_sums[3, bsp.SUM_THREADS](x, partial)
    np.testing.assert_allclose(partial, [x[:128].sum(), x[128:256].sum(), x[256:].sum()])


def test_serial_chain_matches_numpy_and_ignores_extra_threads():
    state = np.array([0.5], dtype=np.float32)
    bsp.serial_chain[2, 32](state, 7, bsp.A, bsp.B)
    np.testing.assert_allclose(state, bsp.fixed_work_reference(np.array([0.5], np.float32), 7), rtol=1e-6)
    state_d = cuda.to_device(np.array([0.5], dtype=np.float32))
    bsp.serial_chain_launcher(state_d, 7)()
    np.testing.assert_allclose(state_d.copy_to_host(), state, rtol=1e-6)


@pytest.mark.parametrize("call, error, match", [
    (lambda: bsp.run_fixed_work(np.ones(4), 1, 32), lh.ArrayArgumentError, "float32"),
    (lambda: bsp.run_fixed_work(np.ones((2, 2), np.float32), 1, 32), lh.ArrayArgumentError, "dimension"),
    (lambda: bsp.run_fixed_work([1.0, 2.0], 1, 32), lh.ArrayArgumentError, "must be an array"),
    (lambda: bsp.run_fixed_work(np.ones(4, np.float32), 0, 32), lh.LaunchConfigError, "at least 1"),
    (lambda: bsp.run_fixed_work(np.ones(4, np.float32), 2.5, 32), lh.LaunchConfigError, "whole number"),
    (lambda: bsp.run_fixed_work(np.ones(4, np.float32), 1, 2048), lh.LaunchConfigError, "1024"),
    (lambda: bsp.run_fixed_work(np.ones(4, np.float32), 1, 32, reps=-1), ValueError, "reps"),
    (lambda: bsp.fixed_work_launcher(np.ones(4, np.float32), np.ones(5, np.float32), 1, 32, 1),
     lh.ArrayArgumentError, "shape"),
    (lambda: bsp.fixed_work_launcher(cuda.to_device(np.ones(4)), np.ones(4, np.float32), 1, 32, 1),
     lh.ArrayArgumentError, "float32"),
    (lambda: bsp.normalize(np.ones(0, np.float32)), ValueError, "empty"),
    (lambda: bsp.normalize(np.ones(3, np.float64)), lh.ArrayArgumentError, "float32"),
    (lambda: bsp.serial_chain_launcher(np.ones(0, np.float32), 3), ValueError, "at least one"),
    (lambda: bsp_exp.measure_speedup(64, [2, 4], threads=32), ValueError, "start at 1"),
    (lambda: bsp_exp.measure_slackness(0, [(1, 32)], sm_count=1), ValueError, "at least 1"),
    (lambda: bsp_exp.slackness_grid(0), ValueError, ">= 1"),
    (lambda: bsp_exp.speedup_blocks(0), ValueError, "at least 1"),
])
def test_wrappers_reject_bad_input_with_a_fix(call, error, match):
    with pytest.raises(error, match=match):
        call()


def test_launch_grids():
    assert bsp_exp.slackness_grid(4, threads=64, max_blocks_per_sm=2, first_threads=(32,)) == [
        (1, 32), (1, 64), (2, 64), (4, 64), (8, 64)]
    grid = bsp_exp.slackness_grid(132)
    assert grid[0] == (1, 32) and grid[-1] == (132 * 32, 256)
    assert all(b * t <= 132 * 32 * 256 for b, t in grid)
    assert bsp_exp.speedup_blocks(132) == [1, 2, 4, 8, 16, 32, 64, 128, 132]
    assert bsp_exp.speedup_blocks(1) == [1]


@sim_only
def test_measurements_under_the_simulator_have_the_columns_and_no_timings():
    slack = bsp_exp.measure_slackness(200, [(1, 32), (2, 32)], sm_count=2, progress=False)
    assert list(slack["blocks"]) == [1, 2] and list(slack["fill"]) == [32 / 4096, 64 / 4096]
    assert {"gbps", "gelems", "status", "total_threads"} <= set(slack.columns)
    assert slack["gbps"].isna().all() and (slack["status"] == "simulator").all()
    speed = bsp_exp.measure_speedup(100, [1, 2], threads=32, reps=2, serial_steps=3, progress=False)
    assert list(speed.columns) == ["blocks", "threads", "program_ms", "parallel_ms", "serial_ms", "empty_ms",
                                   "speedup", "n", "reps", "serial_steps", "status"]
    assert speed["speedup"].isna().all()
    assert math.isnan(bsp_exp.speedup_summary(speed)["s_fit"]) and bsp_exp.speedup_summary(speed)["table"].empty
    assert math.isnan(bsp_exp.slackness_summary(slack)["best_gbps"])


def _speedup_table(s: float) -> pd.DataFrame:
    blocks = np.array(bsp_exp.speedup_blocks(132))
    program = s + (1 - s) / blocks  # ms, with T(1) = 1 ms
    return pd.DataFrame({"blocks": blocks, "threads": 1024, "program_ms": program, "parallel_ms": program - s,
                         "serial_ms": 0.8 * s, "empty_ms": 0.001, "speedup": program[0] / program, "status": "ok"})


def test_speedup_summary_on_amdahl_data():
    fit = bsp_exp.speedup_summary(_speedup_table(0.01))
    assert fit["s_fit"] == pytest.approx(0.01)
    assert fit["max_speedup"] == pytest.approx(100)
    assert fit["s_measured"] == pytest.approx(0.008)
    assert fit["launch_share"] == pytest.approx(0.001)
    np.testing.assert_allclose(fit["table"]["karp_flatt"], 0.01)
    assert list(fit["table"]["blocks"]) == bsp_exp.speedup_blocks(132)[1:]


def test_slackness_summary_reads_the_knee_and_littles_law():
    threads = np.array([32, 64, 128, 256, 512, 1024, 2048, 4096])
    gbps = np.minimum(threads * 8 / 500.0, 10.0)  # 500 ns round trips, saturating at 10 GB/s
    table = pd.DataFrame({"total_threads": threads, "fill": threads / 4096, "gbps": gbps, "status": "ok"})
    s = bsp_exp.slackness_summary(table)
    assert s["best_gbps"] == 10 and s["one_warp_gbps"] == pytest.approx(0.512)
    assert s["iteration_ns"] == pytest.approx(500)
    assert s["little_threads"] == pytest.approx(625)
    assert s["little_fill"] == pytest.approx(625 / 4096)
    assert s["fill_50"] == pytest.approx(512 / 4096) and s["fill_90"] == pytest.approx(1024 / 4096)


def test_trip_times_follow_littles_law_and_skip_waves_and_missing_timings():
    threads = np.array([32, 1024, 4096, 8192])
    table = pd.DataFrame({"blocks": threads // 32, "threads": 32, "total_threads": threads, "fill": threads / 4096,
                          "gbps": [0.512, 8.192, 16.384, 20.0], "status": ["ok", "ok", "ok", "ok"]})
    trips = bsp_exp.trip_times(table)
    assert list(trips["total_threads"]) == [32, 1024, 4096]  # fill 2 runs in waves: left out
    np.testing.assert_allclose(trips["trip_ns"], [500, 1000, 2000])
    table.loc[1, "status"] = "simulator"
    assert list(bsp_exp.trip_times(table)["total_threads"]) == [32, 4096]


# --------------------------------------------------------------------------- lab checkers
SOL = load_solutions("02_bsp_and_amdahl_lab")
SKEL = lab_skeletons("02_bsp_and_amdahl_lab", "import numpy as np\nfrom numba import cuda\n")
CHECKS = [("amdahl", ex.check_amdahl), ("processors_needed", ex.check_processors_needed),
          ("fit_serial", ex.check_fit_serial_fraction), ("grid_stride_update", ex.check_grid_stride)]


@pytest.mark.parametrize("name, check", CHECKS, ids=[c[0] for c in CHECKS])
def test_checker_passes_the_solution_and_rejects_the_skeleton(name, check, capsys):
    check(getattr(SOL, name))
    assert "Correct" in capsys.readouterr().out
    with pytest.raises(lh.CheckFailed):
        check(SKEL[name])


def test_amdahl_checker_names_typical_mistakes():
    with pytest.raises(lh.CheckFailed, match="Gustafson"):
        ex.check_amdahl(lambda s, n: s + (1 - s) * n)
    with pytest.raises(lh.CheckFailed, match="NumPy arrays"):
        ex.check_amdahl(lambda s, n: 1 / (s + (1 - s) / n) if n >= 1 else 1.0)
    with pytest.raises(lh.CheckFailed, match="only the parallel part 1 - s is divided by n"):
        ex.check_amdahl(lambda s, n: 1 / (s + 1 / n))
    with pytest.raises(lh.CheckFailed, match="s = 0"):
        ex.check_amdahl(lambda s, n: 1 / (s + (1 - s) / n) if s > 0 else np.ones_like(n))


def test_processors_checker_names_typical_mistakes():
    with pytest.raises(lh.CheckFailed, match="no number of processors"):
        ex.check_processors_needed(lambda s, t: (1 - s) / (1 / t - s) if 1 / t != s else float("inf"))
    with pytest.raises(lh.CheckFailed, match="do not round"):
        ex.check_processors_needed(lambda s, t: math.ceil((1 - s) / (1 / t - s)) if s * t < 1 else math.inf)
    with pytest.raises(lh.CheckFailed, match="divided by zero"):
        ex.check_processors_needed(lambda s, t: math.inf if t >= 1 / s else (1 - s) / (1 / t - s))


def test_fit_checker_names_typical_mistakes():
    def mean_karp_flatt(n, speedup):
        n, speedup = np.asarray(n, float), np.asarray(speedup, float)
        many = n > 1
        return float(np.clip(np.mean(amdahl.karp_flatt(speedup[many], n[many])), 0, 1))

    def unclipped(n, speedup):
        a = 1 - 1 / np.asarray(n, float)
        b = 1 / np.asarray(speedup, float) - 1 / np.asarray(n, float)
        return float(np.sum(a * b) / np.sum(a * a))

    with pytest.raises(lh.CheckFailed, match="Karp-Flatt"):
        ex.check_fit_serial_fraction(mean_karp_flatt)
    with pytest.raises(lh.CheckFailed, match="clip"):
        ex.check_fit_serial_fraction(unclipped)


# Typical mistakes: the solution with one line changed.
_one_thread_per_element = mutant(SOL.grid_stride_update, "for i in range(start, x.size, stride):",
                                 "for i in range(start, min(start + 1, x.size)):")
_block_stride = mutant(SOL.grid_stride_update, "stride = cuda.gridsize(1)",
                       "stride = cuda.blockDim.x  # wrong stride: overlaps the next blocks")
_one_past_the_end = mutant(SOL.grid_stride_update, "for i in range(start, x.size, stride):",
                           "for i in range(start, x.size + 1, stride):")


@pytest.mark.parametrize("kernel, match", [
    (_one_thread_per_element, "never updated"),
    (_block_stride, "more than once.*cuda.gridsize"),
    (_one_past_the_end, "bounds check"),
])
def test_grid_stride_checker_names_typical_mistakes(kernel, match):
    with pytest.raises(lh.CheckFailed, match=match):
        ex.check_grid_stride(kernel)
