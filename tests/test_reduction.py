"""Chapter 6 (parallel reduction): kernels, host wrapper, tree model, lab checkers, reference data.

Under the simulator (the default here) kernels run a few hundred threads per second once
they use barriers, so the default run checks every simulator-capable kernel on the small
sizes 1, 2, 31, 32, 33 with one- and two-warp blocks, the large odd sizes 1023 and 1025 on
a selection, and 2**20 + 7 with the grid-stride kernel on one warp. Set
``LABHELPERS_FULL_TESTS=1`` for the whole matrix under the simulator (minutes). On a GPU
(``LABHELPERS_BACKEND=gpu``) every kernel, GPU-only ones included, is checked for every
size and every block size.
"""

from __future__ import annotations

import os
from pathlib import Path

import matplotlib
import numpy as np
import pytest

import labhelpers as lh
from numba import cuda
from labhelpers.exercises import reduction as ex
from labhelpers.experiments import reduction as red_exp
from labhelpers.figures import reduction as red_fig
from labhelpers.kernels import reduction as red
from labhelpers import roofline as rl
from labhelpers.models import reduction as tree
from markers import SIM, gpu_only, sim_only
from mutants import lab_skeletons, load_solutions, mutant

matplotlib.use("Agg")

ROOT = Path(__file__).resolve().parents[1]
FULL = os.environ.get("LABHELPERS_FULL_TESTS", "") not in ("", "0") or not SIM
SIZES = (1, 2, 31, 32, 33, 1023, 1025)
full_only = pytest.mark.skipif(not FULL, reason="whole simulator matrix: set LABHELPERS_FULL_TESTS=1")


def _exact(key: str, n: int, threads: int, seed: int = 0, **kw) -> None:
    x = red.integer_valued(n, np.random.default_rng(seed + n))
    got = red.reduce_sum(x, key, threads=threads, **kw)
    assert isinstance(got, np.float32)
    assert got == red.reference_sum(x), f"{key}, n={n}, {threads} threads: got {got}, expected {red.reference_sum(x)}"


# --- every kernel against NumPy -----------------------------------------------------------------

@pytest.mark.parametrize("key", red.SIMULATOR_VARIANTS)
@pytest.mark.parametrize("threads", (32, 64))
def test_small_sizes_exact(key, threads):
    for n in (1, 2, 31, 32, 33):
        _exact(key, n, threads)


@pytest.mark.parametrize("key,threads", [("first_add", 1024), ("grid_stride", 32),
                                         ("atomic_per_element", 32), ("atomic_per_block", 32)])
def test_large_odd_sizes_exact(key, threads):
    for n in (1023, 1025):
        _exact(key, n, threads)


def test_two_pow_20_plus_7_grid_stride_on_one_warp():
    n = 2**20 + 7
    _exact("grid_stride", n, 32, blocks=1 if SIM else None)


@full_only
@pytest.mark.parametrize("key", red.SIMULATOR_VARIANTS)
@pytest.mark.parametrize("threads", red.BLOCK_SIZES)
def test_full_matrix(key, threads):
    sizes = SIZES if SIM else SIZES + (2**20 + 7,)
    for n in sizes:
        _exact(key, n, threads)


@gpu_only
@pytest.mark.parametrize("key", [k for k in red.VARIANTS if red.VARIANTS[k].gpu_only])
@pytest.mark.parametrize("threads", red.BLOCK_SIZES)
def test_gpu_only_variants_on_gpu(key, threads):
    for n in SIZES + (2**20 + 7,):
        _exact(key, n, threads)


@gpu_only
@pytest.mark.parametrize("unroll", (1, 2, 4, 8, 16))
def test_best_kernel_every_unroll(unroll):
    for n in SIZES + (2**20 + 7, 2**21 - 3):  # n * 8 < 2**24: sums stay exact in float32
        x = red.integer_valued(n, np.random.default_rng(n))
        got = red.Reducer(x, "best", threads=256, unroll=unroll)()
        assert got == red.reference_sum(x)


@gpu_only
def test_unsafe_last_warp_kernel_runs_on_gpu():
    x = np.ones(4096, np.float32)
    value = red.run_last_warp_unsafe(x, 256)  # the race may or may not show: only check it runs
    assert np.isfinite(value)


def test_float32_error_within_the_stated_bound():
    rng = np.random.default_rng(3)
    x = (rng.standard_normal(1025) * 1000).astype(np.float32)
    for key, threads in (("grid_stride", 32), ("atomic_per_element", 64)):
        got = float(red.reduce_sum(x, key, threads=threads))
        assert abs(got - red.reference_sum(x)) <= red.error_bound(x)


def test_empty_input_sums_to_zero():
    assert red.reduce_sum(np.zeros(0, np.float32), "sequential", threads=32) == 0.0


def test_device_input_is_used_in_place():
    x = red.integer_valued(100)
    assert red.reduce_sum(cuda.to_device(x), "grid_stride", threads=32) == red.reference_sum(x)


# --- the wrapper's validation --------------------------------------------------------------------

@pytest.mark.parametrize("bad,error", [
    (np.ones(8, np.float64), lh.ArrayArgumentError),
    (np.ones((2, 4), np.float32), lh.ArrayArgumentError),
    (np.ones(16, np.float32)[::2], lh.ArrayArgumentError),
    ([1.0, 2.0], lh.ArrayArgumentError),
])
def test_bad_arrays_are_rejected(bad, error):
    with pytest.raises(error):
        red.reduce_sum(bad, "sequential", threads=32)


@pytest.mark.parametrize("threads", (0, 16, 48, 100, 2048, 256.0, True))
def test_block_size_must_be_a_power_of_two_from_32_to_1024(threads):
    with pytest.raises(lh.LaunchConfigError, match="power-of-two|integer"):
        red.reduce_sum(np.ones(8, np.float32), "sequential", threads=threads)


def test_atomic_per_element_takes_any_block_size():
    _exact("atomic_per_element", 100, 48)
    with pytest.raises(lh.LaunchConfigError):
        red.reduce_sum(np.ones(8, np.float32), "atomic_per_element", threads=2048)


def test_unknown_variant_lists_the_valid_ones():
    with pytest.raises(red.UnknownVariantError, match="sequential"):
        red.reduce_sum(np.ones(8, np.float32), "fastest")


def test_bad_grid_is_rejected():
    with pytest.raises(lh.LaunchConfigError, match="blocks"):
        red.reduce_sum(np.ones(8, np.float32), "grid_stride", threads=32, blocks=0)


@sim_only
@pytest.mark.parametrize("key", [k for k in red.VARIANTS if red.VARIANTS[k].gpu_only])
def test_gpu_only_variants_say_so_under_the_simulator(key):
    with pytest.raises(lh.GPUOnlyError, match="simulator"):
        red.reduce_sum(np.ones(64, np.float32), key, threads=32)


@sim_only
def test_unsafe_kernel_is_not_run_under_the_simulator():
    with pytest.raises(lh.GPUOnlyError, match="simulator"):
        red.run_last_warp_unsafe(np.ones(64, np.float32))


# --- plans and sizes -------------------------------------------------------------------------------

def test_level_sizes_is_kernel_decomposition():
    assert red.level_sizes(2**20, 256) == [(2**20, 4096), (4096, 16), (16, 1)]
    assert red.level_sizes(2**20, 256, per_thread=2) == [(2**20, 2048), (2048, 4), (4, 1)]
    assert red.level_sizes(1, 32) == [(1, 1)]
    assert red.level_sizes(33, 32) == [(33, 2), (2, 1)]
    with pytest.raises(ValueError):
        red.level_sizes(-1, 32)


def test_reducer_launch_plans():
    x = np.ones(1025, np.float32)
    assert red.Reducer(x, "sequential", 32).launches == [(33, 32), (2, 32), (1, 32)]
    assert red.Reducer(x, "first_add", 32).launches == [(17, 32), (1, 32)]
    two = red.Reducer(x, "grid_stride", 32).launches
    assert len(two) == 2 and two[1] == (1, 32) and two[0][0] == min(red.resident_blocks(32), 33)
    assert red.Reducer(x, "atomic_per_element", 128).launches == [(9, 128)]
    assert red.Reducer(x, "atomic_per_block", 256, blocks=2).launches == [(2, 256)]
    assert red.Reducer(x, "sequential", 32).nbytes == 4 * 1025


def test_every_variant_is_described():
    assert red.CLASSIC == ("interleaved_divergent", "interleaved", "sequential", "first_add", "unroll_last_warp",
                           "full_unroll", "grid_stride")
    for key, v in red.VARIANTS.items():
        assert v.key == key and v.title and v.lesson
        assert red.kernel_for(key, 64) is not None or v.gpu_only
    assert red.make_reduce_full_unroll(128) is red.make_reduce_full_unroll(128)
    with pytest.raises(lh.LaunchConfigError):
        red.make_reduce_full_unroll(96)


def test_error_bound():
    x = np.array([1.0, -2.0, 3.0], np.float32)
    assert red.error_bound(x) == pytest.approx(2 * 2.0**-24 * 6)
    assert red.error_bound(x, depth=1) == pytest.approx(2.0**-24 * 6)
    with pytest.raises(ValueError):
        red.integer_valued(2**22, high=8)


def test_sweep_table_under_the_simulator_has_no_timings():
    if not SIM:
        pytest.skip("simulator behaviour")
    x = red.integer_valued(40)
    table = red_exp.sweep_variants(x, ["sequential", "best"], [32], reference=red.reference_sum(x), progress=False)
    assert list(table["variant"]) == ["sequential", "best"]
    assert list(table["status"]) == ["simulator", "invalid"]
    assert table["gbps"].isna().all()
    assert table.loc[0, "rel_error"] == 0.0 and np.isnan(table.loc[1, "result"])


# --- the tree model ------------------------------------------------------------------------------

def test_tree_model_counts_match_the_lectures():
    v1 = tree.tree_levels(1, 64)[0]
    assert (v1.active, v1.warps_with_work, v1.divergent_warps, v1.worst_conflict) == (32, 2, 2, 1)
    v2 = tree.tree_levels(2, 128)
    assert [lv.worst_conflict for lv in v2] == [2, 4, 4, 4, 4, 2, 1]
    assert v2[0].divergent_warps == 0 and v2[0].warps_with_work == 2
    assert max(lv.worst_conflict for lv in tree.tree_levels(2, 256)) == 8
    assert max(lv.worst_conflict for lv in tree.tree_levels(2, 1024)) == 32
    v3 = tree.tree_levels(3, 128)
    assert all(lv.worst_conflict == 1 for lv in v3)
    assert [lv.active for lv in v3] == [64, 32, 16, 8, 4, 2, 1]
    assert v3[0].divergent_warps == 0 and v3[2].divergent_warps == 1


@pytest.mark.parametrize("variant", (1, 2, 3))
@pytest.mark.parametrize("block", (2, 16, 64, 256))
def test_tree_model_adds_everything(variant, block):
    values = np.random.default_rng(block).integers(-9, 9, size=block)
    assert tree.run_tree(values, variant)[0] == values.sum()
    assert len(tree.tree_levels(variant, block)) == int(np.log2(block))


def test_tree_model_table_and_errors():
    table = tree.level_table(2, 64)
    assert list(table.columns) == ["level", "stride", "adding threads", "warps with work", "divergent warps",
                                   "bank conflict (n-way)"]
    assert len(table) == 6
    with pytest.raises(ValueError):
        tree.tree_levels(4, 64)
    with pytest.raises(ValueError):
        tree.tree_levels(1, 48)
    with pytest.raises(ValueError):
        tree.tree_levels(1, 64)[0].bank_counts(0, "both")


def test_bank_counts_of_a_conflicting_level():
    lv = tree.tree_levels(2, 128)[1]  # stride 2: warp 0 touches words 0, 4, ..., 124
    counts = lv.bank_counts(0, "dst")
    assert counts.sum() == 32 and counts.max() == 4 and (counts > 0).sum() == 8


def test_last_warp_pitfall_model():
    values = np.arange(64, dtype=np.float64)
    assert tree.last_warp_in_order(values) == values.sum()
    stale = tree.last_warp_stale_reads(values)
    assert stale == sum(values[k] for k in (0, 32, 16, 8, 4, 2, 1)) != values.sum()
    with pytest.raises(ValueError):
        tree.last_warp_stale_reads(np.ones(32))


@pytest.mark.parametrize("variant", (1, 2, 3))
def test_plot_level_draws(variant):
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots()
    red_fig.draw_level(ax, variant, 64, 9)  # a level beyond the last is clamped
    assert "level 6 of 6" in ax.get_title()
    plt.close(fig)


# --- the lab's checkers -----------------------------------------------------------------------------

SOL = load_solutions("06_reduction_lab")
SKEL = lab_skeletons("06_reduction_lab", "import numpy as np\nfrom numba import cuda, float32, int32\nNBINS = 16\n")


def test_sequential_checker():
    with pytest.raises(lh.CheckFailed, match="^Reduction tree"):
        ex.check_sequential_reduction(SKEL["reduce_sequential"])
    # a typical wrong kernel: the interleaved tree's stride order with sequential indices
    stride_grows = mutant(SOL.reduce_sequential, ("stride = cuda.blockDim.x // 2", "stride = 1"),
                          ("while stride > 0:", "while stride < cuda.blockDim.x:"), ("stride //= 2", "stride *= 2"))
    with pytest.raises(lh.CheckFailed, match="^Reduction tree.*index 0"):
        ex.check_sequential_reduction(stride_grows)


def test_first_add_checker():
    with pytest.raises(lh.CheckFailed):
        ex.check_first_add_any_n(SKEL["reduce_first_add"])
    unguarded = mutant(SOL.reduce_first_add, ("if i < x.size:", "if True:"),
                       ("if i + cuda.blockDim.x < x.size:", "if True:"))
    with pytest.raises(lh.CheckFailed, match="^Missing bounds guard"):
        ex.check_first_add_any_n(unguarded)

    first_half_only = mutant(SOL.reduce_first_add, "v += x[i + cuda.blockDim.x]",
                             "pass  # the element blockDim.x further on is never added")
    with pytest.raises(lh.CheckFailed, match="first blockDim.x elements"):
        ex.check_first_add_any_n(first_half_only)


def test_warp_shuffle_checker(capsys):
    ex.check_warp_shuffle_reduction(SOL.reduce_warp_shuffle)
    if SIM:
        assert "NOT run and NOT checked" in capsys.readouterr().out
    with pytest.raises(lh.CheckFailed, match="does not call a warp shuffle"):
        ex.check_warp_shuffle_reduction(SKEL["reduce_warp_shuffle"])
    assert ex.shuffle_calls(SOL.reduce_warp_shuffle) == ["shfl_down_sync", "shfl_down_sync"]
    assert ex.shuffle_calls(SKEL["reduce_warp_shuffle"]) == []  # the name in a comment does not count


@gpu_only
def test_warp_shuffle_checker_rejects_a_wrong_fold_on_gpu():
    one_step_short = mutant(SOL.reduce_warp_shuffle, "while offset > 0:", "while offset > 1:  # stops before 1", 1)
    with pytest.raises(lh.CheckFailed):
        ex.check_warp_shuffle_reduction(one_step_short)
    with pytest.raises(lh.CheckFailed):
        ex.check_warp_shuffle_reduction(SKEL["reduce_warp_shuffle"])


def test_histogram_checker():
    with pytest.raises(lh.CheckFailed, match="(?i)nothing reached"):
        ex.check_histogram(SKEL["histogram_shared"])
    no_grid_stride = mutant(SOL.histogram_shared, ("while i < values.size:", "if i < values.size:"),
                            ("i += cuda.gridsize(1)", ""))
    with pytest.raises(lh.CheckFailed, match="(?i)only .* elements were counted"):
        ex.check_histogram(no_grid_stride)

    never_zeroed = mutant(SOL.histogram_shared, "s_counts[b] = 0", "pass  # the bins are never zeroed")
    if SIM:  # the simulator reuses one shared array for all blocks: the second block starts with leftovers
        with pytest.raises(lh.CheckFailed):
            ex.check_histogram(never_zeroed)


# --- reference data --------------------------------------------------------------------------------

def test_classic_lecture_table_is_shipped_with_its_source():
    from importlib import resources

    folder = Path(str(resources.files("labhelpers.data.reference")))
    ref = lh.load_reference("ch06_classic_lecture_table", directory=folder)
    assert "Heidelberg" in ref.meta["source"] and ref.meta["date"] == "2022"
    wide = ref.table.pivot(index="number", columns="threads", values="gbps")
    assert wide.shape == (6, 6)
    assert wide.loc[5, 128] == 68.38 and wide.loc[1, 32] == 7.39 and wide.loc[6, 1024] == 29.78
    assert set(ref.table["variant"]) == set(red.CLASSIC[:6])


# --- the chapter's tables and figures, from the shipped reference data --------------------------------

SWEEP = lh.load_reference("ch06_reduction_sweep")
LECTURE = lh.load_reference("ch06_classic_lecture_table")
FLIGHT = lh.load_reference("ch06_loads_in_flight")


def test_reference_tables_are_typed():
    """No notebook repairs a column: the numbers load as numbers (NaN where nothing was measured)."""
    for column in ("threads", "gbps", "result", "rel_error", "gflops"):
        assert SWEEP.table[column].dtype == float, column
    for column in ("bytes_in_flight", "gbps", "unroll", "threads"):
        assert FLIGHT.table[column].dtype.kind in "if", column


COPY = rl.reference_ceilings()


def test_best_gbps_and_ceilings():
    table = SWEEP.table
    assert red_exp.best_gbps(table, "sequential", 128) == pytest.approx(714.6, abs=0.5)
    assert np.isnan(red_exp.best_gbps(table, "no_such_variant"))
    assert "copy" not in set(table["variant"])  # one copy ceiling: measure_dram_bandwidth's, in ch07_ceilings
    yard = red_exp.ceilings(table, COPY.dram_gbs)
    assert list(yard) == list(red_exp.CEILINGS)
    assert yard[red_exp.COPY_CEILING] == COPY.dram_gbs
    assert yard[red_exp.CUB] == red_exp.best_gbps(table, "cupy_sum") and np.isfinite(yard[red_exp.CUB])
    named = red_exp.ceilings(table, 1.0, copy_source="a", sum_source="b")
    assert list(named) == [f"{red_exp.COPY_CEILING}, a", f"{red_exp.CUB}, b"]


def test_one_copy_ceiling_from_one_gpu():
    """Chapter 6 compares with the copy ceiling of ch07_ceilings: the same GPU as its own sweep."""
    assert COPY.gpu == SWEEP.gpu == FLIGHT.gpu
    copies = lh.load_reference("ch07_copy_variants").table
    assert COPY.dram_gbs == pytest.approx(copies["gbps"].max())  # the fastest copy tried is the ceiling


def test_launch_delay_from_the_two_tables():
    d = red_exp.launch_delay_us(SWEEP.table, FLIGHT.table)
    assert d["sweep_us"] > d["flight_us"] > d["kernel_us"] > 0
    # t3 = t + d/3 and t10 = t + d/10, recomputed
    assert d["sweep_us"] == pytest.approx(d["kernel_us"] + d["delay_us"] / red_exp.SWEEP_NUMBER)
    assert d["flight_us"] == pytest.approx(d["kernel_us"] + d["delay_us"] / red_exp.FLIGHT_NUMBER)
    # both tables are held-stream timings: Python's launch cost (tens of µs) is in neither, a few µs at most remain
    assert 0 < d["delay_us"] < 5
    empty = red_exp.launch_delay_us(SWEEP.table.iloc[:0], FLIGHT.table)
    assert all(np.isnan(v) for v in empty.values())


def test_lecture_variant5_model():
    ones = np.ones(256)
    assert tree.lecture_variant5(ones) == 256  # the correct code adds every word
    assert tree.lecture_variant5(ones, loop_condition="tid < 0") == 64  # the loop never adds: 64 of 256
    assert tree.lecture_variant5(ones, last_warp="=") == 4  # one word of the 64 the last warp starts with
    assert tree.lecture_variant5(ones, loop_condition="tid < 0", last_warp="=") == 1
    words = np.arange(256.0)
    assert tree.lecture_variant5(words) == words.sum()
    assert tree.lecture_variant5(words, loop_condition="tid < 0", last_warp="=") == 63  # s[63], copied down
    with pytest.raises(ValueError):
        tree.lecture_variant5(np.ones(48))
    with pytest.raises(ValueError):
        tree.lecture_variant5(ones, last_warp="-=")


def test_gbps_grid_and_best_per_variant():
    grid = red_exp.gbps_grid(LECTURE.table, red.CLASSIC[:6])
    assert list(grid.index) == list(red.CLASSIC[:6]) and list(grid.columns) == list(red.BLOCK_SIZES)
    assert grid.loc["unroll_last_warp", 128] == 68.38 and grid.loc["interleaved_divergent", 32] == 7.39
    full = red_exp.gbps_grid(SWEEP.table)
    assert list(full.index) == list(red.VARIANTS) and full.shape == (len(red.VARIANTS), len(red.BLOCK_SIZES))
    best = red_exp.best_per_variant(LECTURE.table)
    assert list(best.index) == list(red.VARIANTS) and best.loc["best"].isna().all()  # not in the lecture
    assert set(best["threads"].dropna()) == {128}  # the lecture's best block size, for every variant


def test_variant_summary_matches_the_chapter_text():
    summary = red_exp.variant_summary(SWEEP.table, LECTURE.table, COPY.dram_gbs)
    assert list(summary.index) == [v.label for v in red.VARIANTS.values()]
    first = summary.iloc[0]
    assert first["lecture: x variant 1"] == 1 and first["here: x variant 1"] == 1
    # the prose: "From variant 1 to 6: 7.4 times here, at most 4.1 in the lecture"; variant 7 at 88% of the copy
    assert round(summary.iloc[5]["here: x variant 1"], 1) == 7.4
    assert round(summary["lecture: x variant 1"].max(), 1) == 4.1
    assert round(summary.iloc[6]["here: % of copy"]) == 88


def test_max_rel_errors():
    errors = red_exp.max_rel_errors(SWEEP.table, ["grid_stride", "atomic_per_element"])
    assert list(errors.index) == ["grid_stride", "atomic_per_element"]
    assert errors["grid_stride"] < 1e-6 and errors["atomic_per_element"] > 0.4  # the 2**24 stall of the text


def test_verdict_matches_the_chapter_text():
    best = red_exp.best_in_flight(FLIGHT.table)
    assert best["gbps"] == FLIGHT.table["gbps"].max()
    yardsticks = red_exp.ceilings(SWEEP.table, COPY.dram_gbs)
    table = red_exp.verdict(float(best["gbps"]), yardsticks)
    assert list(table.index) == ["best kernel", *yardsticks]
    share = table["best kernel as % of it"]
    assert share[red_exp.CUB] == round(100 * best["gbps"] / red_exp.best_gbps(SWEEP.table, "cupy_sum"), 1)
    assert share[red_exp.COPY_CEILING] == round(100 * best["gbps"] / COPY.dram_gbs, 1)
    assert red_exp.best_in_flight(FLIGHT.table.assign(gbps=np.nan)) is None


def _texts(ax) -> list[str]:
    return [t.get_text() for t in ax.texts]


def test_heatmaps_figure():
    import matplotlib.pyplot as plt

    fig = red_fig.plot_gbps_heatmaps(SWEEP, LECTURE)
    here, lecture = fig.axes[:2]
    assert [t.get_text() for t in here.get_yticklabels()] == [v.label for v in red.VARIANTS.values()]
    assert [t.get_text() for t in lecture.get_yticklabels()] == [red.VARIANTS[k].label for k in red.CLASSIC[:6]]
    assert [t.get_text() for t in here.get_xticklabels()] == [str(t) for t in red.BLOCK_SIZES]
    assert SWEEP.label in here.get_title() and "2^26 float32" in here.get_title()
    assert LECTURE.meta["date"] in lecture.get_title()
    assert "68" in _texts(lecture) and len(_texts(lecture)) == 36  # every cell written out
    assert len(_texts(here)) == len(red.VARIANTS) * len(red.BLOCK_SIZES)
    plt.close(fig)


def test_best_per_variant_figure():
    import matplotlib.pyplot as plt

    yard = red_exp.ceilings(SWEEP.table, COPY.dram_gbs, copy_source=COPY.label, sum_source=SWEEP.label)
    fig = red_fig.plot_best_per_variant(SWEEP, yard)
    ax = fig.axes[0]
    assert len(ax.patches) == len(red.VARIANTS)
    assert ax.get_legend_handles_labels()[1] == list(yard)
    best = red_exp.best_per_variant(SWEEP.table)["gbps"]
    assert f"{best['best']:,.0f}" in _texts(ax)
    assert SWEEP.label in ax.get_title()
    plt.close(fig)


def test_figures_draw_a_live_measurement_beside_the_reference():
    import matplotlib.pyplot as plt

    live = lh.Measured(table=SWEEP.table.assign(gbps=SWEEP.table["gbps"] * 0.8), is_live=True, gpu="Some GPU",
                       label="this GPU: Some GPU", reference=SWEEP)
    fig = red_fig.plot_best_per_variant(live, red_exp.ceilings(live.table, 1000.0, copy_source=live.label))
    ax = fig.axes[0]
    assert len(ax.patches) == 2 * len(red.VARIANTS)  # this GPU's bars and the reference's
    labels = ax.get_legend_handles_labels()[1]
    assert SWEEP.label in labels and "this GPU: Some GPU" in labels
    assert "this GPU: Some GPU" in ax.get_title()
    flight = lh.Measured(table=FLIGHT.table, is_live=True, gpu="Some GPU", label="this GPU: Some GPU",
                         reference=FLIGHT)
    ax2 = red_fig.plot_loads_in_flight(flight, {}).axes[0]
    labels2 = ax2.get_legend_handles_labels()[1]
    assert "threads=256 (this GPU: Some GPU)" in labels2 and f"threads=256 ({FLIGHT.label})" in labels2
    assert not any("No GPU timings" in t.get_text() for t in ax2.texts)
    plt.close("all")


def test_loads_in_flight_figure():
    import matplotlib.pyplot as plt

    yard = red_exp.ceilings(SWEEP.table, COPY.dram_gbs, copy_source=COPY.label, sum_source=SWEEP.label)
    fig = red_fig.plot_loads_in_flight(FLIGHT, yard)
    ax = fig.axes[0]
    labels = ax.get_legend_handles_labels()[1]
    assert [f"threads={t} ({FLIGHT.label})" for t in (256, 1024)] == labels[:2]
    assert labels[2:] == list(yard) and COPY.label in labels[2]
    assert [a.get_text() for a in ax.texts if a.get_text().startswith("unroll")] == [
        f"unroll {u}" for u in (1, 2, 4, 8, 16)]
    assert ax.get_xscale() == "log" and ax.get_ylim()[0] == 0
    plt.close(fig)


def test_figures_without_measurements_say_so():
    import matplotlib.pyplot as plt

    empty = lh.Reference("empty", SWEEP.table.assign(gbps=np.nan), SWEEP.meta)
    fig = red_fig.plot_gbps_heatmaps(empty, LECTURE)
    assert red_fig.NOT_MEASURED in _texts(fig.axes[0])
    fig2 = red_fig.plot_best_per_variant(empty)
    assert red_fig.NOT_MEASURED in _texts(fig2.axes[0]) and not fig2.axes[0].get_legend_handles_labels()[0]
    fig3 = red_fig.plot_loads_in_flight(lh.Reference("f", FLIGHT.table.assign(gbps=np.nan), FLIGHT.meta))
    assert fig3.axes[0].get_xscale() == "linear"
    plt.close("all")


@pytest.mark.judges_no_timing
@gpu_only
def test_live_tables_have_the_reference_columns():
    """What the chapter measures on a GPU has the columns of the reference tables it replaces."""
    sweep = red_exp.reduction_sweep(2**20, keys=["sequential", "best"], threads=(128, 256))
    assert set(SWEEP.table.columns) <= set(sweep.columns) and (sweep["status"] == "ok").all()
    assert "cupy_sum" in set(sweep["variant"])
    flight = red_exp.loads_in_flight(2**20, threads=(256,), unrolls=(1, 2))
    assert list(flight.columns) == list(FLIGHT.table.columns) and flight["gbps"].gt(0).all()


# --- drift check: every measured figure the prose quotes, recomputed from the reference data ---------------

from prose import figure as _g, markdown as _markdown  # noqa: E402  (the drift checks' one reading of the prose)


def _range(lo: str, hi: str) -> str:
    """Two figures as the prose gives a range: one figure when they round alike."""
    return lo if lo == hi else f"{lo} to {hi}"


def _chapter6_figures() -> list[str]:
    t, lec, fl = SWEEP.table, LECTURE.table, FLIGHT.table
    grid, lgrid = red_exp.gbps_grid(t), red_exp.gbps_grid(lec, red.CLASSIC[:6])
    best, lbest = red_exp.best_per_variant(t), red_exp.best_per_variant(lec)
    b, lb = best["gbps"], lbest["gbps"]
    copy = COPY.dram_gbs
    v = list(red.CLASSIC)  # interleaved_divergent ... grid_stride

    def x(a, c, table=b):
        return f"×{table[c] / table[a]:.2f}"

    at32, at64 = grid[32], grid[64]
    f1 = fl[fl["unroll"] == 1]["gbps"]
    f2 = fl[fl["unroll"] == 2]["gbps"]
    f4 = fl[fl["unroll"] == 4]["gbps"]
    f8 = fl[fl["unroll"] == 8]["gbps"]
    f16 = fl.set_index(["threads", "unroll"])["gbps"]
    loss = [1 - f16[(th, 16)] / f16[(th, 8)] for th in (256, 1024)]
    flight1 = float(fl[fl["unroll"] == 1]["bytes_in_flight"].iloc[0])
    v7 = grid.loc["grid_stride", [64, 128, 256, 512, 1024]]
    verdict = red_exp.verdict(float(fl["gbps"].max()), red_exp.ceilings(t, copy))["best kernel as % of it"]
    delay = red_exp.launch_delay_us(t, fl)
    sheet = rl.datasheet_ceilings(SWEEP.gpu)
    ms = t.pivot_table(index="threads", columns="variant", values="median_ms").loc[[64, 128, 256, 512, 1024]]
    second_pass_us = 1e3 * (ms["grid_stride"] - ms["atomic_per_block"])  # same kernel but for the last line
    shuffle_gain = ms["grid_stride"] / ms["warp_shuffle"] - 1
    assert b["atomic_per_block"] > b["warp_shuffle"] > b["grid_stride"], "the text ranks the three in this order"
    assert second_pass_us.idxmax() == 64 and (second_pass_us > 0).all()
    assert shuffle_gain.is_monotonic_increasing, "the text says the shuffles save more the larger the block"
    assert f2.max() < b["grid_stride"] < f4.min(), "the text puts variant 7 between the unroll-2 and unroll-4 points"
    sweep_spread = t[(t["variant"] == "best") & (t["threads"] == red_exp.BEST_THREADS)]["spread"].iloc[0]
    assert abs(1 - delay["sweep_gbps"] / delay["flight_gbps"]) <= sweep_spread, "the text: within the spread"
    return [
        f"copy ceiling: {_g(copy)} GB/s",
        f"reference GPU's copy ceiling ({_g(copy)} GB/s)",
        f"({_g(b['full_unroll'])} against {_g(grid.loc['unroll_last_warp', 256])} GB/s)",
        f"it is {100 * (grid.loc['full_unroll', 256] / grid.loc['unroll_last_warp', 256] - 1):.0f}% faster than variant 5",
        f"up to {100 * (grid.loc['full_unroll', 1024] / grid.loc['unroll_last_warp', 1024] - 1):.0f}% at 1024",
        f"({_g(lb['full_unroll'])} against {_g(lb['unroll_last_warp'])} GB/s at its best",
        f"({_g(at32[v[:3]].min())} to {_g(at32[v[:3]].max())} GB/s)",
        f"twice that ({_range(_g(at32[v[3:6]].min()), _g(at32[v[3:6]].max()))})",
        f"({_g(at64['interleaved'])} and {_g(at64['sequential'])})",
        f"({_g(at64[v[3:6]].min())} to {_g(at64[v[3:6]].max())})",
        f"use {100 * b[v[0]] / copy:.0f}% (variant 1) to {100 * b[v[5]] / copy:.0f}% (variant 6) of the copy ceiling",
        f"({x(v[0], v[1])}, {_g(b[v[0]])} → {_g(b[v[1]])} GB/s; the lecture: {x(v[0], v[1], lb)})",
        f"adds {x(v[1], v[2])} (the lecture: {x(v[1], v[2], lb)})",
        f"({x(v[2], v[3])}, the lecture {x(v[2], v[3], lb)})",
        f"({x(v[3], v[4])} and {x(v[4], v[5])}, against {x(v[3], v[4], lb)} and {x(v[4], v[5], lb)})",
        f"{b[v[5]] / b[v[0]]:.1f} times here, at most {(lb / lb[v[0]]).max():.1f} in",
        f"moves from {best.loc[v[0], 'threads']:.0f} (variant 1) to {best.loc[v[4], 'threads']:.0f} (variants 5 and 6)"
        if best.loc[v[4], "threads"] == best.loc[v[5], "threads"] else "5 and 6 differ",
        f"{_g(b['grid_stride'], -1)} GB/s, {100 * b['grid_stride'] / copy:.0f}% of the copy ceiling, "
        f"{b['grid_stride'] / b['full_unroll']:.1f} times variant 6 ({_g(v7.min(), -1)} to {_g(v7.max(), -1)} at",
        f"warp-shuffle version ({_g(b['warp_shuffle'], -1)}) and one atomic per block ({_g(b['atomic_per_block'], -1)})",
        f"{b['warp_shuffle'] / b['grid_stride'] - 1:.0%} and {b['atomic_per_block'] / b['grid_stride'] - 1:.0%} more "
        "than variant 7",
        f"it takes {second_pass_us.min():.1f} to {second_pass_us.max():.1f} µs less per sum",
        f"({shuffle_gain[64]:.1%} at 64 threads, {shuffle_gain[1024]:.1%} at 1024)",
        f"about {second_pass_us.median():.0f} µs per sum between variant 7's second pass",
        f"unroll-2 and unroll-4 points ({_g(f2.mean(), -1)} and {_g(f4.mean(), -1)} GB/s)",
        f"reads {_g(f1.mean(), -1)} GB/s, whatever the block size",
        f"/ {f1.mean() / 1e3:.2f}\\ \\text{{TB/s}} \\approx {round(flight1 / f1.mean(), -1):.0f}$ ns",
        f"give {_g(f2.mean(), -1)} GB/s ({f2.mean() / f1.mean():.2f} times",
        f"grows to {round(2 * flight1 / f2.mean(), -1):.0f} ns",
        f"four give {_g(f4.min(), -1)} and eight {_range(_g(f8.min(), -1), _g(f8.max(), -1))} GB/s, "
        f"{f8.max() / copy:.0%} of the copy ceiling",
        f"({100 * min(loss):.1f} to {100 * max(loss):.1f}% less)",
        f"reaches {100 * b['grid_stride'] / copy:.0f}% of the copy ceiling without trying",
        f"reads {_g(fl['gbps'].max())} GB/s, {verdict[red_exp.CUB]:.1f}% of `cupy.sum` and "
        f"{verdict[red_exp.COPY_CEILING]:.1f}% of the copy ceiling",
        f"at {100 * fl['gbps'].max() / sheet.dram_gbs:.0f}% of the datasheet's bandwidth and `cupy.sum` at "
        f"{red_exp.best_gbps(t, 'cupy_sum') / sheet.dram_gbs:.0%}, about as close as the copy ceiling itself comes ({copy / sheet.dram_gbs:.0%})",
        f"About {delay['delay_us']:.0f} µs, and it is worth",
        f"the two timings differ by {1 - delay['sweep_gbps'] / delay['flight_gbps']:.1%}, about the spread of the "
        f"sweep's own repetitions ({sweep_spread:.1%},",
        f"this kernel of about {delay['kernel_us']:.0f} µs",
        f"(×{b[v[1]] / b[v[0]]:.2f}); in the lecture's table ×{lb[v[1]] / lb[v[0]]:.2f}",
        f"reads about {f1.mean() / 1e3:.1f} TB/s with one load in flight",
    ]


def test_chapter6_prose_quotes_the_reference_data():
    """Re-measuring fails here instead of silently contradicting the text: every quoted figure is recomputed."""
    text = _markdown("book/06_reduction.ipynb")
    missing = [f for f in _chapter6_figures() if f not in text]
    assert not missing, "chapter 6's prose no longer matches its reference data; update these:\n" + "\n".join(missing)
    assert "4,150" not in text  # the copy of an older reference run
    # no GPU named by hand as a data source: the one "H200" is a datasheet figure
    assert text.count("H200") == 1 and "(an H200: 4.8 TB/s)" in text


def test_lab6_prose_quotes_the_reference_data():
    text = _markdown("labs/06_reduction_lab.ipynb")
    b = red_exp.best_per_variant(SWEEP.table)["gbps"]
    for figure in (f"variant reads {_g(b['sequential'])} GB/s and exercise 2's {_g(b['first_add'])} GB/s",
                   f"the {_g(COPY.dram_gbs)} GB/s copy ceiling"):
        assert figure in text, figure
    assert "H200" not in text
