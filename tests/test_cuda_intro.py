"""Chapter 1, "CUDA in Python": kernels against NumPy on odd sizes, launch arithmetic, errors, and the lab's checkers."""

from __future__ import annotations

import sys
from pathlib import Path

import matplotlib
import numpy as np
import pandas as pd
import pytest

import labhelpers as lh
from labhelpers.device import DeviceInfo
from labhelpers.exercises import cuda_intro as ex
from labhelpers.experiments import cuda_intro as intro_exp
from labhelpers.figures import cuda_intro as intro_fig
from labhelpers.kernels import cuda_intro as intro
from labhelpers import gpus, launch
from labhelpers.models import launch_summary
from markers import gpu_only, sim_only
import prose
from mutants import lab_skeletons, load_solutions, mutant

from numba import cuda  # noqa: E402  (after labhelpers: it chooses the simulator)

matplotlib.use("Agg")
ROOT = Path(__file__).resolve().parents[1]
ODD_SIZES = [1, 31, 33, 257, 1003]


SOL = load_solutions("01_cuda_in_python_lab")
SKEL = lab_skeletons("01_cuda_in_python_lab", "import labhelpers as lh\nfrom numba import cuda\n")


# --- kernels against NumPy ----------------------------------------------------------------------

@pytest.mark.parametrize("n", ODD_SIZES)
@pytest.mark.parametrize("threads", [32, 100, 256])
def test_global_index_writes_every_index_once(n, threads):
    out = np.full(n, -1, dtype=np.int64)
    intro.global_index[lh.blocks_for(n, threads), threads](out)
    assert np.array_equal(out, np.arange(n))


def test_block_and_thread_reproduces_the_seed_example():
    block_of = np.full(32, -1, dtype=np.int32)
    thread_of = np.full(32, -1, dtype=np.int32)
    intro.block_and_thread[4, 8](block_of, thread_of)
    assert (block_of[21], thread_of[21]) == (2, 5)  # 5 + 2 * 8 = 21
    assert np.array_equal(block_of * 8 + thread_of, np.arange(32))


@pytest.mark.parametrize("n", ODD_SIZES)
def test_add_and_saxpy_match_numpy(n):
    rng = np.random.default_rng(n)
    x, y = rng.standard_normal((2, n)).astype(np.float32)
    blocks, threads = lh.launch_1d(n, 128)
    out = np.full(n, np.nan, dtype=np.float32)
    intro.add[blocks, threads](x, y, out)
    assert np.array_equal(out, x + y)
    out[:] = np.nan
    intro.saxpy[blocks, threads](np.float32(-1.5), x, y, out)
    assert np.allclose(out, np.float32(-1.5) * x + y, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("n", [1, 257])
def test_run_saxpy_accepts_device_arrays(n):
    x = np.arange(n, dtype=np.float32)
    y = np.ones(n, dtype=np.float32)
    assert np.allclose(intro.run_saxpy(3.0, cuda.to_device(x), cuda.to_device(y)), 3 * x + 1)


# n % 4 = 0, 1, 2, 3; fewer elements than one group; a partial last block at 64 threads (256 elements per block)
VEC4_SIZES = [1, 3, 4, 6, 257, 555, 1031]


@pytest.mark.parametrize("n", VEC4_SIZES)
def test_saxpy_vec4_matches_numpy(n):
    rng = np.random.default_rng(n)
    x, y = rng.standard_normal((2, n)).astype(np.float32)
    for threads in (64, 3):  # 3 threads per block: the tail's three elements still find three threads
        got = intro.run_saxpy_vec4(-1.5, x, y, threads=threads)
        assert np.allclose(got, intro.saxpy_numpy(-1.5, x, y), rtol=1e-6, atol=1e-6)
    assert np.allclose(intro.run_saxpy_vec4(2.0, cuda.to_device(x), cuda.to_device(y)), 2 * x + y, atol=1e-6)


def test_saxpy_vec4_grid_covers_groups_and_tail():
    assert intro.saxpy_vec4_blocks(0, 256) == 1 and intro.saxpy_vec4_blocks(1031, 256) == 2  # 257 groups + 3
    assert intro.saxpy_vec4_blocks(3, 1) == 3  # no group; the tail takes three threads
    assert intro.saxpy_vec4_blocks(2**26, 256) == 2**26 // 1024


def test_saxpy_vec4_on_a_partial_last_block_has_no_race():
    n = 555  # 138 groups and a tail of 3: 3 blocks of 64 threads, the last one mostly idle
    x, y, out = np.arange(n, dtype=np.float32), np.ones(n, dtype=np.float32), np.zeros(n, dtype=np.float32)
    assert lh.check_races(intro.saxpy_vec4, intro.saxpy_vec4_blocks(n, 64), 64, np.float32(2), x, y, out).ok


def test_run_saxpy_vec4_errors():
    x = np.ones(10, dtype=np.float32)
    with pytest.raises(lh.ArrayArgumentError, match="astype"):
        intro.run_saxpy_vec4(1.0, x.astype(np.float64), x)
    with pytest.raises(lh.ArrayArgumentError, match="shape"):
        intro.run_saxpy_vec4(1.0, x, np.ones(11, dtype=np.float32))
    with pytest.raises(lh.LaunchConfigError, match="1024"):
        intro.run_saxpy_vec4(1.0, x, x, threads=2048)

    class Misaligned:  # what a view x_d[1:] of a device array looks like: data 4 bytes past a 16-byte boundary
        __cuda_array_interface__ = {"data": (4096 + 4, False)}

    assert intro.aligned16(x) and not intro.aligned16(Misaligned())


@gpu_only
def test_run_saxpy_vec4_refuses_a_misaligned_view():
    x_d = cuda.to_device(np.ones(9, dtype=np.float32))
    with pytest.raises(lh.ArrayArgumentError, match="16-byte boundary.*copy"):
        intro.run_saxpy_vec4(1.0, x_d[1:], x_d[1:])


@pytest.mark.parametrize("shape", [(1, 1), (1, 37), (37, 1), (17, 33), (50, 70)])
def test_add_2d_matches_numpy(shape):
    rng = np.random.default_rng(sum(shape))
    a, b = rng.standard_normal((2, *shape)).astype(np.float32)
    assert np.array_equal(intro.run_add_2d(a, b, block=(16, 8)), a + b)


def test_saxpy_numpy_writes_into_out_and_intensity_is_one_sixth():
    x = np.arange(5, dtype=np.float32)
    out = np.empty_like(x)
    assert intro.saxpy_numpy(2.0, x, x, out) is out
    assert np.array_equal(out, 3 * x)
    assert intro.saxpy_intensity() == pytest.approx(2 / 12)
    assert (intro.saxpy_bytes(10), intro.saxpy_flops(10)) == (120, 20)


# --- wrappers reject bad input with a message that names the fix ----------------------------------

def test_run_saxpy_errors():
    x = np.ones(10, dtype=np.float32)
    with pytest.raises(lh.ArrayArgumentError, match="astype"):
        intro.run_saxpy(1.0, x.astype(np.float64), x)
    with pytest.raises(lh.ArrayArgumentError, match="shape"):
        intro.run_saxpy(1.0, x, np.ones(11, dtype=np.float32))
    with pytest.raises(lh.LaunchConfigError, match="1024"):
        intro.run_saxpy(1.0, x, x, threads=2048)


def test_run_add_2d_errors():
    a = np.ones((4, 5), dtype=np.float32)
    with pytest.raises(lh.LaunchConfigError, match="2048 threads"):
        intro.run_add_2d(a, a, block=(64, 32))
    with pytest.raises(lh.ArrayArgumentError, match="shape"):
        intro.run_add_2d(a, np.ones((5, 4), dtype=np.float32))
    with pytest.raises(lh.ArrayArgumentError, match="contiguous"):
        intro.run_add_2d(a.T, a.T)


def test_launch_2d():
    assert launch.launch_2d((50, 50), (16, 16)) == ((4, 4), (16, 16))
    assert launch.launch_2d((50, 70), (32, 8)) == ((3, 7), (32, 8))  # x covers the 70 columns
    for bad in [(0, 16), (16, 0), (2048, 1), (1, 2048)]:
        with pytest.raises(lh.LaunchConfigError):
            launch.launch_2d((10, 10), bad)
    with pytest.raises(lh.LaunchConfigError):
        launch.launch_2d((0, 10))


# --- the launch calculator -------------------------------------------------------------------------

def test_summarize_launch_seed_example_and_partial_warps():
    s = launch_summary.summarize_launch(257, 256)
    assert (s.blocks, s.total_threads, s.idle_threads, s.warps_per_block, s.warps, s.empty_lanes) == (
        2, 512, 255, 8, 16, 0)
    s = launch_summary.summarize_launch(1000, 100)  # 4 warps per block, 28 empty lanes in each of 10 blocks
    assert (s.blocks, s.idle_threads, s.warps, s.empty_lanes) == (10, 0, 40, 280)
    assert s.lane_efficiency == pytest.approx(1000 / 1280)
    assert len(s.as_table()) == 9


@pytest.mark.parametrize("n, threads", [(0, 256), (10, 0), (10, 2048)])
def test_summarize_launch_rejects_impossible_launches(n, threads):
    with pytest.raises(lh.LaunchConfigError):
        launch_summary.summarize_launch(n, threads)


@pytest.mark.parametrize("n, threads", [(257, 256), (1000, 100), (4096, 32), (1, 1024), (300, 2048)])
def test_draw_launch_draws_or_explains(n, threads):
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots()
    intro_fig.draw_launch(ax, n, threads)
    if threads > 1024:
        assert "LaunchConfigError" in ax.texts[0].get_text()
    else:
        s = launch_summary.summarize_launch(n, threads)
        assert f"{s.blocks} blocks" in ax.get_title() and len(ax.patches) >= s.blocks
    plt.close(fig)


def test_widget_builds():
    widget = lh.interactive_figure(intro_fig.draw_launch, n=(1, 4096, 1, 257), threads=[256, 100])
    assert widget.children


# --- device properties -----------------------------------------------------------------------------

def _h100_like() -> DeviceInfo:
    return DeviceInfo(backend="gpu", name="Test GPU", compute_capability=(9, 0), sm_count=132,
                      total_memory_bytes=80 * 2**30, warp_size=32, max_threads_per_block=1024,
                      registers_per_block=65536, max_shared_per_block=48 * 1024, clock_khz=1_980_000,
                      memory_clock_khz=2_619_000, memory_bus_bits=5120, l2_bytes=50 * 2**20)


def test_device_record_as_a_table_and_derived_figures():
    table = _h100_like().as_table()
    assert list(table.columns) == ["property", "value"]
    assert gpus.fp32_cores(table) == 132 * 128
    assert gpus.peak_fp32_gflops(table) == pytest.approx(2 * 16896 * 1.98e9 / 1e9)
    bandwidth = dict(zip(table["property"], table["value"]))["peak_memory_bandwidth_gbs"]
    assert bandwidth == pytest.approx(3352.3, rel=1e-3)
    assert gpus.ridge_point(table) == pytest.approx(66908 / 3352.3, rel=1e-3)
    described = gpus.describe_device(table)
    assert described.loc["SMs", "value"] == "132" and "TFLOP/s" in described.loc["peak FP32 (no tensor cores)", "value"]


def _json_round_trip(table: pd.DataFrame) -> pd.DataFrame:
    """What a JSON round trip of a properties table gives back (missing values become None)."""
    return pd.DataFrame(table.astype(object).where(pd.notna(table), None).values.tolist(), columns=table.columns)


@sim_only
def test_device_properties_survive_the_simulator_and_json():
    restored = _json_round_trip(lh.device_info().as_table())
    assert gpus.ridge_point(restored) is None
    assert gpus.describe_device(restored).loc["SMs", "value"] == "n/a"


def test_device_properties_survive_json():
    table = _h100_like().as_table()
    restored = _json_round_trip(table)
    assert gpus.ridge_point(restored) == pytest.approx(gpus.ridge_point(table))
    assert gpus.describe_device(restored).loc["SMs", "value"] == "132"
    with pytest.raises(ValueError, match="property/value"):
        gpus.describe_device(pd.DataFrame({"a": [1]}))


@gpu_only
def test_device_properties_of_this_gpu():
    info = lh.device_info()
    table = _json_round_trip(info.as_table())
    assert gpus.ridge_point(table) > 0
    assert gpus.describe_device(table).loc["SMs", "value"] == str(info.sm_count)


def test_seed_core_counts_agree_with_lanes_per_sm():
    for label, props in gpus.SEED_DEVICE_QUERY.items():
        cc = tuple(int(v) for v in label.split("CC ")[1].rstrip(")").split("."))
        assert int(props["SMs"]) * gpus.FP32_LANES_PER_SM[cc] == int(props["FP32 cores"]), label


def test_compare_with_older_gpus_adds_one_column():
    table = _h100_like().as_table()
    out = gpus.compare_with_older_gpus(table)
    assert gpus.compare_with_seed is gpus.compare_with_older_gpus
    assert list(out.columns)[:3] == list(gpus.SEED_DEVICE_QUERY)
    assert out.loc["SMs", "Test GPU (CC 9.0)"] == "132"
    assert out.loc["FP32 cores", "Test GPU (CC 9.0)"] == "16896"


# --- SAXPY three ways (under the simulator: correctness only) ------------------------------------

@sim_only
def test_time_saxpy_under_the_simulator():
    host = intro_exp.time_saxpy(300, intro_exp.HOST_NUMPY, repeat=2)
    assert host.times_ms is not None and host.clock == "host-clock"
    for method in (intro_exp.GPU_WITH_TRANSFERS, intro_exp.GPU_KERNEL_ONLY):
        timing = intro_exp.time_saxpy(300, method, repeat=2)
        assert not timing.is_gpu_timing and timing.nbytes == 3600
    with pytest.raises(ValueError, match="unknown SAXPY method"):
        intro_exp.time_saxpy(10, "cpu")


@sim_only
def test_saxpy_three_ways_table_has_the_plotted_columns():
    table = intro_exp.saxpy_three_ways([64, 100], progress=False)
    assert {"n", "method", "median_ms", "gbps", "status"} <= set(table.columns)
    assert len(table) == 2 * len(intro_exp.SAXPY_METHODS)
    assert set(table.loc[table["method"] != intro_exp.HOST_NUMPY, "status"]) == {"simulator"}


def test_saxpy_summary_and_plot():
    rows = [{"n": n, "method": m, "median_ms": t * n / 2**20, "gbps": 12 * n / (t * n / 2**20) / 1e6, "status": "ok"}
            for n in (2**20, 2**22) for m, t in zip(intro_exp.SAXPY_METHODS, (2.0, 1.0, 0.01))]
    table = pd.DataFrame(rows)
    summary = intro_exp.saxpy_summary(table)
    assert summary.index.name == "SAXPY, n = 2^22"
    assert summary.loc[intro_exp.GPU_WITH_TRANSFERS, "x slower than kernel only"] == pytest.approx(100)
    meta = {"gpu": "Test GPU", "compute_capability": "9.0", "driver": "?", "runtime": "?", "date": "?"}
    fig = intro_fig.plot_saxpy_three_ways(lh.Reference("t", table, meta))
    assert len(fig.axes) == 2 and len(fig.legends) == 1
    fig = intro_fig.plot_saxpy_three_ways(lh.Reference("t", table, meta), live=table)  # a GPU run: solid lines too
    assert len(fig.legends[0].get_texts()) == 2 * len(intro_exp.SAXPY_METHODS)
    empty = table.assign(median_ms=float("nan"), gbps=float("nan"))  # no timings: no log scale, no crash
    intro_fig.plot_saxpy_three_ways(lh.Reference("t", empty, meta))


@sim_only
def test_saxpy_kernels_checks_both_kernels_and_times_nothing_under_the_simulator():
    table = intro_exp.saxpy_kernels(1031, (("saxpy", 64), ("saxpy_vec4", 64)), repeat=1)
    assert list(table.columns) == intro_exp.SAXPY_KERNEL_COLUMNS
    assert list(table["blocks"]) == [17, 5] and list(table["elements_per_thread"]) == [1, 4]
    assert set(table["status"]) == {"simulator"} and table["gbps"].isna().all()  # no copy row without a GPU
    summary = intro_exp.saxpy_kernels_summary(table)
    assert list(summary["kernel"]) == ["saxpy", "saxpy_vec4"] and "of the copy" in summary
    with pytest.raises(ValueError, match="unknown SAXPY kernel"):
        intro_exp.saxpy_kernels(8, (("saxpy_vec8", 64),))


@sim_only
def test_bench_refuses_the_simulator():
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        import cuda_intro as bench_module
    finally:
        sys.path.pop(0)
    with pytest.raises(RuntimeError, match="real GPU"):
        bench_module.collect("/nonexistent")
    assert callable(bench_module.bench)


# --- the lab's checkers ----------------------------------------------------------------------------

# Typical mistakes: the solution with one line changed.
fill_unguarded = mutant(SOL.fill_index, "if i < out.size:", "if True:")
fill_off_by_one = mutant(SOL.fill_index, "if i < out.size:", "if i <= out.size:")
fill_thread_only = mutant(SOL.fill_index, "i = cuda.grid(1)",
                          "i = cuda.threadIdx.x  # forgets the block: every block writes the first elements")
add_unguarded = mutant(SOL.vector_add, "if i < out.size:", "if True:")
add_wrong_op = mutant(SOL.vector_add, "out[i] = x[i] + y[i]", "out[i] = x[i] - y[i]")
scale_swapped = mutant(SOL.scale_2d, "col, row = cuda.grid(2)",
                       "row, col = cuda.grid(2)  # the other convention: does not match the checker's launch")
scale_rows_unguarded = mutant(SOL.scale_2d, "if row < out.shape[0] and col < out.shape[1]:",
                              "if col < out.shape[1]:")


@pytest.mark.parametrize("kernel, message", [
    (SKEL["fill_index"], "never written"),
    (fill_unguarded, "^Missing bounds guard"),
    (fill_off_by_one, "^Missing bounds guard"),
    (fill_thread_only, "^Local index instead of global"),
])
def test_check_fill_index_rejects(kernel, message):
    with pytest.raises(lh.CheckFailed, match=message):
        ex.check_fill_index(kernel)


@pytest.mark.parametrize("kernel, message", [
    (SKEL["vector_add"], "never written"),
    (add_unguarded, "^Missing bounds guard"),
    (add_wrong_op, "wrong for n=1"),
])
def test_check_vector_add_rejects(kernel, message):
    with pytest.raises(lh.CheckFailed, match=message):
        ex.check_vector_add(kernel)


@pytest.mark.parametrize("kernel, message", [
    (SKEL["scale_2d"], "for 1x1"),
    (scale_swapped, "^Swapped i/j.*j, i = cuda.grid"),
    (scale_rows_unguarded, "bounds check|outside|out of bounds"),
])
def test_check_scale_2d_rejects(kernel, message):
    with pytest.raises(lh.CheckFailed, match=message):
        ex.check_scale_2d(kernel)


def test_kernel_checkers_reject_plain_functions():
    with pytest.raises(lh.CheckFailed, match="@cuda.jit"):
        ex.check_fill_index(SOL.fill_index.py_func)
    with pytest.raises(lh.CheckFailed, match="did not compile or run"):
        ex.check_vector_add(fill_unguarded)  # wrong number of arguments


def _floor_blocks(n, threads):
    blocks = n // threads
    return blocks, blocks * threads - n, blocks * ((threads + 31) // 32)


def _no_error(n, threads):
    blocks = -(-n // threads)
    return blocks, blocks * threads - n, blocks * ((threads + 31) // 32)


def _floor_warps(n, threads):
    blocks = -(-n // threads)
    if not 1 <= threads <= 1024:
        raise ValueError("threads per block must lie in 1..1024")
    return blocks, blocks * threads - n, blocks * (threads // 32)


@pytest.mark.parametrize("func, message", [
    (lambda n, threads: None, "returned None"),
    (_floor_blocks, "^Grid not covering n.*CEILING"),
    (_floor_warps, "partly filled warp"),
    (_no_error, "raise ValueError"),
    (lambda n, threads: (1, 2), "return three"),
])
def test_check_launch_config_rejects(func, message):
    with pytest.raises(lh.CheckFailed, match=message):
        ex.check_launch_config(func)


# --- CUDA C's qualifiers in Numba, recursion ----------------------------------------------------

@pytest.mark.parametrize("n", ODD_SIZES)
def test_qualifier_kernels_match_numpy(n):
    x = np.random.default_rng(n).standard_normal(n).astype(np.float32)
    np.testing.assert_allclose(intro.run_polynomial(x), intro.polynomial_numpy(x), rtol=1e-5, atol=1e-5)  # FMA on a GPU
    np.testing.assert_array_equal(intro.run_median_filter(x), intro.median_filter_numpy(x))
    np.testing.assert_array_equal(intro.run_reverse_each_block(x), intro.reverse_each_block_numpy(x))


def test_qualifier_specifications_on_known_values():
    np.testing.assert_allclose(intro.polynomial_numpy(np.array([0, 1, 2], np.float32)), [1, 0.625, 0])
    np.testing.assert_array_equal(intro.median_filter_numpy(np.array([5, 1, 9, 3, 7], np.float32)), [5, 5, 5, 7, 7])
    np.testing.assert_array_equal(intro.reverse_each_block_numpy(np.arange(5), threads=2), [1, 0, 3, 2, 4])


def test_reverse_each_block_has_no_race():
    assert lh.check_races(intro.reverse_each_block, 3, intro.REVERSE_THREADS, np.arange(150, dtype=np.float32)).ok


@sim_only
def test_reverse_each_block_needs_its_barrier():
    args = (3, intro.REVERSE_THREADS, np.arange(150, dtype=np.float32))
    racy = mutant(intro.reverse_each_block, "cuda.syncthreads()  # RAW: every element must be in the tile "
                  "before any thread reads another's", "pass")
    assert not lh.check_races(racy, *args).ok


def test_fibonacci_recurses():
    np.testing.assert_array_equal(intro.run_fibonacci(), [0, 1, 1, 2, 3, 5, 8, 13, 21, 34, 55])
    np.testing.assert_array_equal(intro.run_fibonacci(3), [0, 1, 1])
    with pytest.raises(lh.ArgumentError, match="count"):
        intro.run_fibonacci(intro.FIB_MAX + 2)


def test_qualifier_wrappers_reject_bad_arrays():
    with pytest.raises(lh.ArrayArgumentError, match="float32"):
        intro.run_polynomial(np.ones(4))
    with pytest.raises(lh.ArrayArgumentError, match="float32"):
        intro.run_median_filter(np.ones(4))
    with pytest.raises(lh.ArrayArgumentError, match="dimension"):
        intro.run_reverse_each_block(np.ones((2, 2), np.float32))


# --- an error the GPU reports late --------------------------------------------------------------

@sim_only
def test_asynchronous_error_under_the_simulator_raises_at_the_launch():
    steps = intro_exp.asynchronous_error()
    assert list(steps.columns) == intro_exp.ASYNC_ERROR_COLUMNS and len(steps) == 5
    results = list(steps["result"])
    assert results[1].startswith("IndexError") and str(intro_exp.FAR_INDEX) in results[1]
    assert all(r == "ok: no error" for i, r in enumerate(results) if i != 1)


@gpu_only
def test_asynchronous_error_on_a_gpu_surfaces_at_the_synchronisation():
    steps = intro_exp.asynchronous_error()
    results = list(steps["result"])
    assert results[0] == results[1] == results[2] == "ok: no error", results
    assert results[3].startswith("CudaAPIError") and results[4] != "ok: no error", results
    assert "ILLEGAL_ADDRESS" in results[3] or "LAUNCH_FAILED" in results[3], results
    out = cuda.to_device(np.arange(4))  # this process's context is untouched
    assert np.array_equal(out.copy_to_host(), np.arange(4))


# --- compute capability ----------------------------------------------------------------------------

def test_compute_capability_features():
    table = gpus.compute_capability_features()
    assert list(table.index) == sorted(table.index, key=lambda v: tuple(map(int, v.split("."))))
    assert "recursion" in table.loc["2.0", "what it brought"] and "shuffle" in table.loc["3.0", "what it brought"]
    t4 = gpus.compute_capability_features((7, 5))
    assert list(t4["on CC 7.5"]) == ["yes"] * 6 + ["no"] * 2
    assert (gpus.compute_capability_features("9.0")["on CC 9.0"] == "yes").all()
    with pytest.raises(ValueError, match="compute capability"):
        gpus.compute_capability_features("Hopper")


def test_peak_memory_bandwidth_of_the_reference():
    table = lh.load_reference("ch01_device_properties").table
    assert gpus.peak_memory_bandwidth(table) == pytest.approx(3201e3 * 6016 / 8 * 2 / 1e6, rel=1e-3)


def test_saxpy_plot_takes_a_measured():
    measured = lh.live_or_reference(None, "ch01_saxpy_three_ways")
    fig = intro_fig.plot_saxpy_three_ways(measured)
    assert "H200" not in fig._suptitle.get_text()  # the title names no GPU: the legend does
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    assert labels and all(measured.reference.label in label for label in labels)


# --- the chapter's prose against the reference data (drift check) --------------------------------

def _prose(path: Path) -> str:
    import nbformat

    nb = nbformat.read(path, as_version=4)
    return " ".join(" ".join(c.source for c in nb.cells if c.cell_type == "markdown").split())


def _pct(x: float) -> str:
    return f"{100 * x:.0f} %"


def test_chapter_1_prose_quotes_the_reference_data():
    """Every measured figure in chapter 1's text, recomputed from the reference data it comes from."""
    text = _prose(ROOT / "book" / "01_cuda_in_python.ipynb")
    saxpy = lh.load_reference("ch01_saxpy_three_ways").table
    ms = saxpy.pivot(index="n", columns="method", values="median_ms")
    gbs = saxpy.pivot(index="n", columns="method", values="gbps")
    K, T, H = intro_exp.GPU_KERNEL_ONLY, intro_exp.GPU_WITH_TRANSFERS, intro_exp.HOST_NUMPY
    small = ms.index <= 2**23
    props = lh.load_reference("ch01_device_properties").table
    peak = gpus.peak_memory_bandwidth(props)
    copy = float(lh.load_reference("ch07_copy_variants").table["gbps"].max())  # chapter 7's fastest copy
    transfers = lh.load_reference("ch03_transfers").table
    biggest = transfers[transfers["nbytes"] == transfers["nbytes"].max()].set_index("transfer")["gbps"]
    empty_us = float(lh.load_reference("ch02_speedup").table["empty_ms"].iloc[0]) * 1e3
    numpy_wins = [n for n in ms.index if ms.loc[n, H] < ms.loc[n, K]]
    g28, k28, t28, h28 = gbs.loc[2**28, K], ms.loc[2**28, K], ms.loc[2**28, T], ms.loc[2**28, H]
    cache_range = gbs.loc[2**19:2**22, H]
    dram_range = gbs.loc[2**24:, H]
    fp32 = gpus.peak_fp32_gflops(props)
    issue_us = 1e3 * saxpy.pivot(index="n", columns="method", values="issue_ms").loc[small, K]  # the host's share
    with_transfers = (ms[T] / ms[H]).loc[2**24:]  # from 2^24 on the two curves run side by side
    best_n = int(with_transfers.idxmin())
    held = lh.load_reference("ch07_roofline_points").table.set_index("name").loc["SAXPY (chapter 1 kernel)"]
    held_n = int(held["flops"]) // intro.saxpy_flops(1)
    expected = [
        f"between {ms.loc[small, K].min() * 1e3:.0f} and {ms.loc[small, K].max() * 1e3:.0f} µs",
        f"{ms.loc[small, K].min() * 1e3:.0f} to {ms.loc[small, K].max() * 1e3:.0f} µs is *one* launch",
        f"({intro.saxpy_bytes(2**23) / 1e6:.1f} MB moved)",
        f"({intro.saxpy_bytes(2**23) / g28 / 1e3:.0f} µs at $2^{{23}}$)",
        f"at $2^{{26}}$ the curve reaches {gbs.loc[2**26, K] / 1e3:.1f} TB/s",
        f"$2^{{28}}$ {g28 / 1e3:.1f} TB/s, {_pct(g28 / peak)} of the memory's datasheet peak and "
        f"{_pct(g28 / copy)} of the copy (the printout above)",
        f"flat at about {ms.loc[:2**15, T].median():.1f} ms, {(ms.loc[:2**15, T] / ms.loc[:2**15, K]).median():.0f} "
        "times the kernel-only time",
        f"{t28:.0f} ms against {k28:.2f} ms for the kernel, {t28 / k28:.0f} times longer",
        f"The useful bytes then flow at {gbs.loc[2**28, T]:.0f} GB/s",
        f"measures {biggest['H2D pinned']:.0f} GB/s from pinned memory",
        f"reach only {biggest['H2D pageable']:.0f} to {biggest['D2H pageable']:.0f} GB/s, "
        f"{g28 / gbs.loc[2**28, T]:.0f} times less than the kernel's {g28 / 1e3:.1f} TB/s",
        f"{ms.loc[2**10, H] * 1e3:.1f} µs at $2^{{10}}$, {ms.loc[2**10, T] / ms.loc[2**10, H]:.0f} times faster",
        f"takes {ms.loc[2**10, T]:.1f} ms for $2^{{10}}$ elements and NumPy {ms.loc[2**10, H] * 1e3:.1f} µs",
        f"up to $2^{{{max(numpy_wins).bit_length() - 1}}}$ elements",
        f"NumPy runs at {gbs.loc[max(numpy_wins), H]:.0f} GB/s",
        f"from $2^{{{max(numpy_wins).bit_length()}}}$ on the resident GPU wins, by {h28 / k28:.0f} times",
        f"drops to {cache_range.min():.0f}-{cache_range.max():.0f} GB/s",
        f"$2^{{24}}$ to {dram_range.min():.0f}-{dram_range.max():.0f} GB/s",
        f"Chapter 2's {empty_us:.0f} µs",
        f"({ms.loc[2**24, T]:.1f} against {ms.loc[2**24, H]:.1f} ms there, {t28:.0f} against {h28:.0f} ms at $2^{{28}}$)",
        f"at best {_pct(1 - with_transfers.min())} less time (at $2^{{{best_n.bit_length() - 1}}}$)",
        f"the host clock around the call alone reads {issue_us.min():.0f} to {issue_us.max():.0f} µs",
        f"finds SAXPY at {held['gbps'] / 1e3:.1f} TB/s, {_pct(held['gbps'] / copy)} of the copy, "
        f"already at $2^{{{held_n.bit_length() - 1}}}$",
        "Both are costs of issuing a launch from Python",
        f"a factor of up to {(ms[T] / ms[H]).max():.0f}",
        f"{biggest['H2D pinned']:.0f} instead of {biggest['H2D pageable']:.0f} to {biggest['D2H pageable']:.0f} GB/s",
        f"SAXPY does {g28 / 6 / 1e3:.2f} TFLOP/s, under 1 % of the reference GPU's {fp32 / 1e3:.1f} TFLOP/s",
        f"{(ms.loc[:2**15, T] / ms.loc[:2**15, K]).median():.0f} to {t28 / k28:.0f} times",
    ]
    assert g28 / 6 < 0.01 * fp32
    assert issue_us.max() < 1e3 * ms.loc[small, K].min()  # the host's issue cost is part of the bracketed call
    assert with_transfers.min() < 1 < with_transfers.loc[2**28]  # a best size that gains, a largest that loses
    assert held["gbps"] > gbs.loc[held_n, K]  # the GPU time alone is faster than the call from Python
    missing = [e for e in expected if e not in text]
    assert not missing, f"chapter 1's text no longer matches the reference data: {missing}"
    assert "H200" not in text and "H100" not in text, "name the reference GPU from its data, not by hand"


NCU_CSV = ROOT / "bench" / "tuning" / "results" / "ncu-2026-11-29.csv"


def _ncu_metrics(kernel_prefix: str) -> dict[str, float]:
    """Nsight Compute's metrics of the first profiled launch whose kernel name starts with ``kernel_prefix``."""
    import csv

    rows = [r for r in csv.reader(line for line in NCU_CSV.read_text().splitlines() if line.startswith('"'))]
    first = next(r[0] for r in rows if r[4].startswith(kernel_prefix))
    return {r[-3]: float(r[-1].replace(",", "")) for r in rows if r[0] == first}


def test_chapter_1_vec4_section_quotes_the_reference_data_and_the_profile():
    """The faster SAXPY's figures: the table from ch01_saxpy_kernels, the profile from Nsight Compute's CSV."""
    text = _prose(ROOT / "book" / "01_cuda_in_python.ipynb")
    t = lh.load_reference("ch01_saxpy_kernels").table
    copy = float(t.loc[t["kernel"] == intro_exp.COPY_ROW, "gbps"].iloc[0])
    k = t[t["kernel"] != intro_exp.COPY_ROW].set_index(["kernel", "threads"])
    one, vec = k.loc[("saxpy", 256)], k.loc[("saxpy_vec4", 256)]
    assert vec["gbps"] == pytest.approx(vec["of_copy"] * copy) and vec["of_copy"] >= 0.90  # the issue's target
    before, after = _ncu_metrics("cuda_intro::saxpy["), _ncu_metrics("saxpy_candidates::saxpy_vec4[")
    warps = 2**26 // 32

    def both(metric: str, scale: float = 1.0, digits: int = 0) -> tuple[str, str]:
        return tuple(f"{m[metric] * scale:,.{digits}f}" for m in (before, after))

    us = both("gpu__time_duration.sum", 1e-3)
    dram = both("dram__throughput.avg.pct_of_peak_sustained_elapsed")
    inst = both("smsp__inst_executed.sum", 1e-6, 1)
    per32 = (f"{before['smsp__inst_executed.sum'] / warps:.0f}", f"{after['smsp__inst_executed.sum'] / warps:.1f}")
    issue = both("smsp__issue_active.avg.pct_of_peak_sustained_active")
    wait = both("smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio")
    f = prose.figure
    expected = [
        f"moves {f(one['gbps'])} GB/s, {one['of_copy']:.2f} of a device-to-device copy",
        f"| kernel time | {us[0]} µs | {us[1]} µs |",
        f"| DRAM throughput, % of its peak | {dram[0]} % | {dram[1]} % |",
        f"| warp instructions executed | {inst[0]} million | {inst[1]} million |",
        f"| the same, per 32 elements | {per32[0]} | {per32[1]} |",
        f"| issue slots busy | {issue[0]} % | {issue[1]} % |",
        f'("long scoreboard") | {wait[0]} | {wait[1]} |',
        f"the memory is only {dram[0]} % busy, yet every warp issues {per32[0]} instructions for its 32 elements",
        f"`saxpy_vec4` moves {f(vec['gbps'])} GB/s, {vec['of_copy']:.2f} times the copy's {f(copy)} GB/s",
        f"reaches {one['of_copy']:.2f} of the copy at 256 threads per block "
        f"({k.loc[('saxpy', 128), 'of_copy']:.2f} at 128, {k.loc[('saxpy', 1024), 'of_copy']:.2f} at 1024)",
        f"({per32[1]} per 32 elements instead of {per32[0]}), the memory {dram[1]} % busy",
        f"({wait[1]} cycles per instruction instead of {wait[0]})",
        f"take SAXPY from {one['of_copy']:.2f} to {vec['of_copy']:.2f} of a copy",
        f"`saxpy_vec4` runs at {vec['of_copy']:.2f} times the bandwidth of a device-to-device copy",
    ]
    assert after["smsp__inst_executed.sum"] * 3 < before["smsp__inst_executed.sum"]  # "a third of the instructions"
    assert vec["of_copy"] > 1 and vec["gbps"] > copy  # "faster than a copy"
    missing = [e for e in expected if e not in text]
    assert not missing, f"chapter 1's faster-SAXPY section no longer matches its data: {missing}"
