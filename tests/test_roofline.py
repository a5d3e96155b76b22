"""Chapter 7: the roofline model, the ceiling kernels, the toolkit's cache, the guard against impossible points,
the chapter's measurements and figures, the profiler helpers, the lab checkers.

Kernels run under Numba's CUDA simulator on odd sizes and are compared with NumPy.
"""

from __future__ import annotations

import importlib.util
import json
import math
import sys
import types
from pathlib import Path

import labhelpers as lh  # noqa: I001  (first: chooses the simulator before numba.cuda is imported)
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
from numba import cuda, float32  # noqa: E402

from labhelpers import host, profiler, roofline  # noqa: E402
from labhelpers.device import SIMULATOR_NAME, DeviceInfo  # noqa: E402
from labhelpers.exercises import roofline as ex  # noqa: E402
from labhelpers.experiments import roofline as rx  # noqa: E402
from labhelpers.figures import roofline as roofline_fig  # noqa: E402
from labhelpers.kernels import roofline as rk  # noqa: E402
from labhelpers.refdata import save_reference  # noqa: E402
from labhelpers.roofline import measure as rm  # noqa: E402
from labhelpers.timing import Timing  # noqa: E402
from markers import gpu_only, sim_only  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
META = {"gpu": "Test GPU", "compute_capability": "9.0", "driver": "13.0", "runtime": "13.0", "date": "2026-01-01"}


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path, monkeypatch):
    monkeypatch.setenv(roofline.CACHE_ENV_VAR, str(tmp_path / "cache"))


def _solutions():
    spec = importlib.util.spec_from_file_location("sol07", ROOT / "labs" / "solutions" / "07_profiling_roofline_lab.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# ------------------------------------------------------------------------------------------ kernels

@pytest.mark.parametrize("n", [1, 31, 33, 257, 1003])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_stream_copy_copies_every_element(n, dtype):
    x = np.random.default_rng(n).random(n).astype(dtype)
    got = rk.run_stream_copy(x, blocks=2, threads=32)
    np.testing.assert_array_equal(got, x)


@pytest.mark.parametrize("n", [1, 3, 4, 5, 63, 64, 65, 1003])
def test_stream_copy16_copies_every_element_of_a_complex128_buffer(n):
    """16-byte accesses: the main loop (four strides) and the tail (what is left) both copy correctly."""
    rng = np.random.default_rng(n)
    x = (rng.random(n) + 1j * rng.random(n)).astype(np.complex128)
    np.testing.assert_array_equal(rk.run_stream_copy(x, blocks=2, threads=8), x)


def test_stream_copy16_copies_a_float32_buffer_through_a_complex128_view():
    x = np.random.default_rng(1).random(4 * 37).astype(np.float32)
    x_d = cuda.to_device(x)
    out_d = cuda.device_array(x.size, dtype=np.float32)
    rk.stream_copy16[2, 8](x_d.view(np.complex128), out_d.view(np.complex128))
    np.testing.assert_array_equal(out_d.copy_to_host(), x)


@pytest.mark.parametrize("grid", [(1, 1), (3, 32), (40, 32)])
def test_stream_copy_is_correct_for_any_grid(grid):
    """One thread, a few warps, and more threads than elements (the grid covering the array)."""
    x = np.arange(1000, dtype=np.float32)
    blocks, threads = grid
    np.testing.assert_array_equal(rk.run_stream_copy(x, blocks=blocks, threads=threads), x)


@sim_only
def test_load16_and_store16_are_plain_indexing_under_the_simulator():
    a = np.array([1 + 2j, 3 + 4j])
    assert rk.load16(a, 1) == 3 + 4j
    rk.store16(a, 0, 5 + 6j)
    assert a[0] == 5 + 6j


def test_copy_variants_cover_access_widths_and_grids():
    widths = {np.dtype(d).itemsize for _, d, _, _ in roofline.COPY_VARIANTS}
    assert widths == {4, 8, 16}
    assert {g for *_, g in roofline.COPY_VARIANTS} == {"one wave", "one element per thread"}
    for kernel, dtype, threads, _ in roofline.COPY_VARIANTS:
        assert hasattr(rk, kernel) and not lh.check_launch(threads)
        assert (kernel == "stream_copy16") == (np.dtype(dtype) == np.complex128)


def test_copy_variants_table_sorts_the_tried_copies():
    tried = [{"kernel": "stream_copy", "access_bytes": 8, "threads": 256, "blocks": 1056, "grid": "one wave",
              "gbps": 3800.0, "how": "a"},
             {"kernel": "stream_copy16", "access_bytes": 16, "threads": 256, "blocks": 1056, "grid": "one wave",
              "gbps": 4000.0, "how": "b"}]
    c = roofline.Ceilings(gpu="Test GPU", dram_gbs=4000.0, l2_gbs=None, fp32_gflops=None, fp64_gflops=None,
                          source="measured", label="t", details={"tried": {"dram_gbs": tried}})
    table = roofline.copy_variants_table(c)
    assert list(table.columns) == roofline.COPY_VARIANT_COLUMNS
    assert list(table["kernel"]) == ["stream_copy16", "stream_copy"]
    empty = roofline.copy_variants_table(roofline.Ceilings("g", 1.0, None, None, None, "measured", "t"))
    assert len(empty) == 0


def test_stream_copy_bytes_count_read_and_write():
    assert rk.stream_copy_bytes(1000, 4) == 8000


@pytest.mark.parametrize("steps", [4, 5, 12])
def test_l2_read_matches_numpy(steps):
    x = np.arange(64, dtype=np.float32)
    got, total = rk.run_l2_read(x, steps, blocks=2, threads=8)
    rounded = 4 * math.ceil(steps / 4)
    np.testing.assert_allclose(got, rk.l2_read_reference(x, total, rounded), rtol=1e-6)
    assert total == 16


def test_l2_read_reads_every_element_equally_often():
    x = np.ones(32, dtype=np.float32)
    got, total = rk.run_l2_read(x, 8, blocks=1, threads=16)
    assert got.sum() == total * 8  # every load counted once


@pytest.mark.parametrize("threads", [1, 8, 32, 33, 100, 270336])
def test_l2_step_is_an_odd_multiple_of_32_covering_the_grid(threads):
    step = rk.l2_step(threads)
    assert step >= threads and step % 32 == 0 and (step // 32) % 2 == 1


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_fma_chains_matches_numpy(dtype):
    start = np.linspace(0.5, 1.5, 37).astype(dtype)
    got = rk.run_fma_chains(start.copy(), iters=1, threads=32)
    np.testing.assert_allclose(got, rk.fma_chains_reference(start, 1), rtol=1e-5)
    assert got.dtype == dtype


def test_fma_chains_flops():
    assert rk.fma_chains_flops(threads=10, iters=3) == 2 * 8 * 16 * 3 * 10


@pytest.mark.parametrize("n", [1, 33, 257])
@pytest.mark.parametrize("nfma", [0, 3])
def test_fma_per_element_matches_numpy(n, nfma):
    x = np.random.default_rng(1).random(n).astype(np.float32)
    got = rk.run_fma_per_element(x, nfma, blocks=2, threads=32)
    np.testing.assert_allclose(got, rk.fma_per_element_reference(x, nfma), rtol=1e-5)


def test_fma_per_element_intensity():
    assert rk.fma_per_element_intensity(16, 4) == 4.0
    assert rk.fma_per_element_flops(10, 3) / rk.fma_per_element_bytes(10, 4) == rk.fma_per_element_intensity(3, 4)


def test_wrappers_reject_bad_input_with_a_fix():
    with pytest.raises(lh.LaunchConfigError, match="float32"):
        rk.run_stream_copy(np.arange(10))
    with pytest.raises(lh.ArrayArgumentError, match="ascontiguousarray"):
        rk.run_stream_copy(np.ones(20, dtype=np.float32)[::2])
    with pytest.raises(lh.LaunchConfigError, match="power-of-two"):
        rk.run_l2_read(np.ones(48, dtype=np.float32), 4)
    with pytest.raises(lh.LaunchConfigError, match="nfma"):
        rk.run_fma_per_element(np.ones(8, dtype=np.float32), -1)
    with pytest.raises(lh.LaunchConfigError, match="threads"):
        rk.full_grid(2048)
    with pytest.raises(lh.ArrayArgumentError, match="shape"):
        rk.run_stream_copy(np.ones(8, dtype=np.float32), out=cuda.device_array(9, dtype=np.float32))


def test_sixteen_byte_copies_refuse_misaligned_views():
    class View:  # what a sliced GPU array reports: its data pointer
        def __init__(self, address):
            self.__cuda_array_interface__ = {"data": (address, False)}

    assert rk._aligned16(View(4096)) and rk._aligned16(np.ones(3))
    assert not rk._aligned16(View(4096 + 8))


@sim_only
def test_timing_functions_are_gpu_only_under_the_simulator():
    for fn in (rx.timing_hygiene, rx.timing_repeats, rx.representative_points, rk.profile_target):
        with pytest.raises(lh.GPUOnlyError, match="no GPU"):
            fn()


@sim_only
def test_sweeps_give_the_chapter_columns_with_nan_timings():
    table = rx.intensity_sweep(progress=False)
    assert list(table["nfma"]) == list(rx.SWEEP_NFMA)
    assert table["intensity"].tolist() == [v / 4 for v in rx.SWEEP_NFMA]
    assert (table["status"] == "simulator").all() and table["gflops"].isna().all()
    gemm = rx.skewed_gemm_sweep(progress=False)
    assert gemm["shape"].iloc[0] == "1024-1024-1024" and gemm["shape"].iloc[-1] == "1048576-1-1024"
    assert (gemm["m"] * gemm["n"] == 1024 * 1024).all() and (gemm["flops"] == 2 * 1024**3).all()
    assert gemm["gflops"].isna().all()


def test_gemm_intensity_collapses_as_the_shape_skews():
    square = roofline.gemm_intensity(1024, 1024, 1024)
    assert square == pytest.approx(2 * 1024**3 / (4 * 3 * 1024**2))
    assert roofline.gemm_intensity(1024 * 1024, 1, 1024) == pytest.approx(0.5, rel=1e-2)
    shapes = rx.skewed_shapes_table()
    assert list(shapes.columns) == ["m", "n", "k", "intensity"] and shapes["intensity"].iloc[0] == square


# ------------------------------------------------------------------------------------------- model

def test_attainable_is_the_minimum_of_the_two_roofs():
    assert roofline.attainable(1.0, 3000, 60000) == 3000
    assert roofline.attainable(100.0, 3000, 60000) == 60000
    np.testing.assert_allclose(roofline.attainable([0.5, 20, 40], 3000, 60000), [1500, 60000, 60000])
    with pytest.raises(ValueError):
        roofline.attainable(-1, 3000, 60000)
    with pytest.raises(ValueError):
        roofline.attainable(1, 0, 60000)


def test_machine_balance_and_bound():
    assert roofline.machine_balance(67000, 3350) == pytest.approx(20.0)
    assert roofline.bound(0.25, 3350, 67000) == "memory"
    assert roofline.bound(64, 3350, 67000) == "compute"


def test_worked_intensities():
    assert roofline.saxpy_counts(1000).intensity == pytest.approx(1 / 6)
    assert roofline.reduction_counts(10**6).intensity == pytest.approx(0.25, rel=1e-5)
    assert roofline.matmul_naive_counts(4096).intensity == pytest.approx(0.25, rel=1e-3)
    assert roofline.matmul_tiled_counts(4096, 16).intensity == pytest.approx(4.0, rel=1e-2)
    assert roofline.matmul_tiled_counts(4096, 32).intensity == pytest.approx(8.0, rel=1e-2)
    assert roofline.matmul_ideal_counts(4096).intensity == pytest.approx(4096 / 6)
    assert roofline.stencil_counts(10**6, 5, cached=True).intensity == pytest.approx(9 / 8)
    assert roofline.stencil_counts(10**6, 5, cached=False).intensity == pytest.approx(9 / 24)
    assert roofline.nbody_counts(65536).intensity == pytest.approx(20 / 16, rel=1e-3)
    assert roofline.nbody_counts(65536, tile=256).intensity == pytest.approx(20 * 256 / 16, rel=1e-2)
    with pytest.raises(ValueError):
        roofline.matmul_tiled_counts(1024, 0)


def test_intensity_table_lists_every_worked_kernel():
    table = roofline.intensity_table()
    assert list(table.columns) == ["kernel", "flops", "bytes", "intensity", "assumption"]
    assert len(table) == 10
    assert (table["intensity"] == table["flops"] / table["bytes"]).all()
    names = " ".join(table["kernel"])
    for word in ("SAXPY", "reduction", "naive", "tiles", "stencil", "n-body"):
        assert word in names


def test_time_bounds_finds_a_transfer_bound_kernel():
    c = roofline.saxpy_counts(2**26)
    table = roofline.time_bounds(c.flops, c.nbytes, host_bytes=c.nbytes, peak_gflops=67000, bandwidth_gbs=3350,
                                  link_gbs=roofline.PCIE5_X16_GBS)
    assert table.loc[table["binding"], "limit"].tolist() == ["host transfer"]
    table = roofline.time_bounds(c.flops, c.nbytes, host_bytes=0, peak_gflops=67000, bandwidth_gbs=3350,
                                  link_gbs=roofline.PCIE5_X16_GBS)
    assert table.loc[table["binding"], "limit"].tolist() == ["device memory"]


def test_peaks_at_the_reported_clock():
    h100 = DeviceInfo(backend="gpu", name="NVIDIA H100 80GB HBM3", compute_capability=(9, 0), sm_count=132,
                      clock_khz=1_980_000)
    assert roofline.fp32_peak_at_clock(h100) == pytest.approx(132 * 128 * 2 * 1.98)
    assert roofline.fp64_peak_at_clock(h100) == pytest.approx(132 * 64 * 2 * 1.98)
    unknown = DeviceInfo(backend="gpu", name="future", compute_capability=(99, 0), sm_count=1, clock_khz=1)
    assert roofline.fp32_peak_at_clock(unknown) is None


@sim_only
def test_the_simulator_has_no_clock_to_peak_at():
    assert roofline.fp32_peak_at_clock() is None and roofline.fp64_peak_at_clock() is None


@gpu_only
def test_peaks_at_this_gpus_reported_clock():
    info = lh.device_info()
    lanes = roofline.FP32_LANES_PER_SM.get(tuple(info.compute_capability))
    peak = roofline.fp32_peak_at_clock()  # e.g. 132 SMs x 128 lanes x 2 flops x 1.98 GHz on an H100 or H200
    if lanes is None:  # an architecture the table does not know yet
        assert peak is None
    else:
        assert peak == pytest.approx(info.sm_count * lanes * 2 * info.clock_khz / 1e6)


# --------------------------------------------------------------------------------------- datasheets

@pytest.mark.parametrize("name, key", [
    ("NVIDIA H100 80GB HBM3", "H100 SXM5 80GB"), ("NVIDIA H100 PCIe", "H100 PCIe 80GB"),
    ("NVIDIA H100 NVL", "H100 NVL 94GB"), ("NVIDIA H200", "H200 SXM 141GB"), ("NVIDIA H200 NVL", "H200 NVL 141GB"),
    ("NVIDIA A100-SXM4-80GB", "A100 SXM4 80GB"), ("NVIDIA A100-SXM4-40GB", "A100 40GB"),
    ("NVIDIA A100 80GB PCIe", "A100 PCIe 80GB"), ("NVIDIA A100-PCIE-40GB", "A100 40GB"), ("Tesla T4", "T4"),
    ("NVIDIA L4", "L4"), ("Tesla V100-SXM2-16GB", "V100 SXM2"), ("Tesla V100-PCIE-32GB", "V100 PCIe"),
    ("NVIDIA L40S", None), ("Tesla V100S-PCIE-32GB", None), ("NVIDIA GeForce RTX 4090", None),
])
def test_datasheet_matching(name, key):
    entry = roofline.datasheet_entry(name)
    assert (entry["key"] if entry else None) == key
    sheet = roofline.datasheet_ceilings(name)
    assert (sheet is None) == (key is None)
    if sheet:
        assert sheet.l2_gbs is None and sheet.dram_gbs > 0 and sheet.label == f"datasheet: {key}"


def test_datasheet_fp32_agrees_with_lanes_times_clock():
    for entry in roofline.ceilings._datasheets():
        assert entry["source"] and entry["url"].startswith("https://")
        if entry["boost_clock_mhz"]:
            lanes = 64 if entry["key"].startswith(("A100", "V100", "T4")) else 128
            computed = entry["sm_count"] * lanes * 2 * entry["boost_clock_mhz"] / 1e3
            assert entry["fp32_gflops"] == pytest.approx(computed, rel=0.03), entry["key"]


def test_datasheet_table():
    assert len(roofline.datasheet_table()) >= 12


@sim_only
def test_datasheet_default_under_the_simulator():
    assert roofline.datasheet_ceilings() is None  # no GPU to look up


@gpu_only
def test_datasheet_default_is_this_gpu():
    name = lh.device_info().name
    sheet = roofline.datasheet_ceilings()
    assert (sheet is None) == (roofline.datasheet_entry(name) is None)
    assert sheet is None or sheet.gpu == name


# ----------------------------------------------------------------------------------- ceilings, cache

def _ceilings(**kw):
    values = dict(gpu="Test GPU", dram_gbs=3000.0, l2_gbs=9000.0, fp32_gflops=60000.0, fp64_gflops=30000.0,
                  source="measured", label="measured on Test GPU", details={"how": {"dram_gbs": "stream_copy"}})
    values.update(kw)
    return roofline.Ceilings(**values)


@sim_only
def test_measuring_is_gpu_only():
    for fn in (roofline.measure_ceilings, roofline.measure_dram_bandwidth, roofline.measure_l2_bandwidth,
               roofline.measure_fma_peak):
        with pytest.raises(lh.GPUOnlyError, match="reference_ceilings"):
            fn()


def test_cache_dir_follows_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv(roofline.CACHE_ENV_VAR, str(tmp_path))
    assert roofline.device_cache_dir("NVIDIA H100 80GB HBM3") == tmp_path / "NVIDIA_H100_80GB_HBM3"
    monkeypatch.delenv(roofline.CACHE_ENV_VAR)
    assert roofline.cache_root() == Path.home() / ".cache" / "labhelpers"


def test_ceilings_round_trip_through_the_cache_file():
    c = _ceilings()
    path = roofline.device_cache_dir("Test GPU") / roofline.CEILINGS_FILE
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(c.to_json()))
    assert roofline.load_cached_ceilings("Test GPU") == c
    path.write_text("{not json")
    assert roofline.load_cached_ceilings("Test GPU") is None
    assert roofline.load_cached_ceilings("Other GPU") is None


def test_ceilings_balance_table_and_comparison():
    c = _ceilings()
    assert c.balance() == pytest.approx(20.0)
    assert c.balance("fp64_gflops", "l2_gbs") == pytest.approx(30000 / 9000)
    assert c.attainable(1.0) == 3000.0
    assert list(c.as_table()["ceiling"]) == list(roofline.CEILING_NAMES)
    assert math.isnan(_ceilings(dram_gbs=None).balance())
    with pytest.raises(KeyError):
        c.value("dram")
    cmp = roofline.compare_ceilings(c, roofline.datasheet_ceilings("NVIDIA H100 80GB HBM3"))
    assert cmp.loc[0, "measured / datasheet"] == pytest.approx(3000 / 3350)
    assert pd.isna(cmp.loc[1, "datasheet"])  # no datasheet L2 figure


def _reference_dir(tmp_path, monkeypatch):
    ref = tmp_path / "ref"
    save_reference("ch07_ceilings", _ceilings().as_table(), ref, meta=META)
    points = pd.DataFrame([{"name": "saxpy", "chapter": "07", "flops": 2e8, "nbytes": 1.2e9, "intensity": 1 / 6,
                            "median_ms": 0.4, "gflops": 500.0, "gbps": 3000.0}])
    save_reference("ch07_roofline_points", points, ref, meta=META)
    monkeypatch.setenv("LABHELPERS_REFERENCE_DIR", str(ref))


def test_reference_ceilings_and_points_are_labelled_with_their_gpu(tmp_path, monkeypatch):
    _reference_dir(tmp_path, monkeypatch)
    c = roofline.reference_ceilings()
    assert c.gpu == "Test GPU" and c.source == "reference" and "Test GPU" in c.label
    assert c.dram_gbs == 3000.0 and c.fp64_gflops == 30000.0
    table, label = roofline.points_or_reference()  # no point recorded here (an empty cache): the reference's
    assert table["name"].tolist() == ["saxpy"] and "Test GPU" in label


@sim_only
def test_ceilings_or_reference_uses_the_reference_without_a_gpu(tmp_path, monkeypatch):
    _reference_dir(tmp_path, monkeypatch)
    c = roofline.ceilings_or_reference(progress=False)
    ref = roofline.reference_ceilings()
    assert (c.gpu, c.label, c.dram_gbs, c.fp64_gflops) == (ref.gpu, ref.label, ref.dram_gbs, ref.fp64_gflops)
    assert c.source_line().startswith("Data source: reference data 'ch07_ceilings'") and "no GPU" in c.source_line()


def test_record_point_refuses_simulator_and_host_timings():
    sim = Timing(label="k", times_ms=None)
    with pytest.raises(lh.GPUOnlyError, match="only real GPU timings"):
        roofline.record_point("k", 1e9, 1e9, sim, chapter="07")
    host = lh.wall_time(lambda: None, repeat=2)
    with pytest.raises(lh.GPUOnlyError):
        roofline.record_point("k", 1e9, 1e9, host, chapter="07")
    assert len(roofline.load_points()) == 0  # nothing stored, and the simulator has no points


def test_record_point_stores_and_replaces():
    timing = Timing(label="k", times_ms=(2.0, 2.0, 2.0), clock="cuda-events")  # as a GPU run would give
    rec = roofline.record_point("matmul", 2e9, 1e9, timing, chapter="05")
    assert rec["gflops"] == pytest.approx(1000.0) and rec["intensity"] == 2.0 and rec["source"] == "chapter"
    roofline.record_point("matmul", 4e9, 1e9, timing, chapter="05")
    roofline.record_point("matmul", 4e9, 1e9, timing, chapter="06")
    here = SIMULATOR_NAME if lh.is_simulator() else lh.device_info().name  # stored under this device's name
    points = roofline.load_points(here)
    assert len(points) == 2 and points.loc[points["chapter"] == "05", "flops"].item() == 4e9
    with pytest.raises(ValueError, match="positive"):
        roofline.record_point("x", 0, 1e9, timing, chapter="05")
    roofline.clear_points(here)
    assert len(roofline.load_points(here)) == 0


# ------------------------------------------------------------------------- impossible measurements

HERE = SIMULATOR_NAME if lh.is_simulator() else lh.device_info().name  # where record_point stores


def _gpu_timing(ms: float = 2.0) -> Timing:
    return Timing(label="k", times_ms=(ms, ms, ms), clock="cuda-events")  # as a GPU run would give


def _cache_ceilings_here(**kw) -> roofline.Ceilings:
    """Ceilings 'measured on this GPU': copy 3,000 GB/s, L2 9,000 GB/s, FP32 60,000, FP64 30,000 GFLOP/s."""
    c = _ceilings(gpu=HERE, details={"date": "2026-01-02"}, **kw)
    roofline.save_cached_ceilings(c)
    assert roofline.load_cached_ceilings(HERE) == c
    return c


def test_impossible_measurement_is_a_lab_error_exported_by_the_package():
    assert issubclass(lh.ImpossibleMeasurement, lh.LabError) and lh.ImpossibleMeasurement is roofline.ImpossibleMeasurement


def test_record_point_refuses_a_kernel_whose_check_failed():
    with pytest.raises(lh.ImpossibleMeasurement, match="check failed"):
        roofline.record_point("k", 1e9, 1e9, _gpu_timing(), chapter="07", checked=False)
    with pytest.raises(TypeError, match="True or False"):
        roofline.record_point("k", 1e9, 1e9, _gpu_timing(), chapter="07", checked="yes")
    with pytest.raises(lh.ImpossibleMeasurement, match="check failed"):  # what np.all(...) returns
        roofline.record_point("k", 1e9, 1e9, _gpu_timing(), chapter="07", checked=np.bool_(False))
    assert roofline.record_point("k", 1e9, 1e9, _gpu_timing(), chapter="07", checked=np.bool_(True))
    roofline.clear_points(HERE)
    sim = Timing(label="k", times_ms=None)  # refused for the failed check first, on either backend
    with pytest.raises(lh.ImpossibleMeasurement, match="check failed"):
        roofline.record_point("k", 1e9, 1e9, sim, chapter="07", source="lab", checked=False)
    assert len(roofline.load_points(HERE, include_labs=True)) == 0


@pytest.mark.parametrize("ms", [0.0, -1.0, float("nan"), float("inf")])
def test_record_point_refuses_a_time_of_zero_or_less(ms):
    timing = Timing(label="k", times_ms=(1.0, ms, 1.0), clock="cuda-events")
    with pytest.raises(lh.ImpossibleMeasurement, match="impossible.*positive number of milliseconds"):
        roofline.record_point("k", 1e9, 1e9, timing, chapter="07")
    assert len(roofline.load_points(HERE)) == 0


def test_record_point_refuses_bytes_faster_than_any_memory_ceiling_of_this_gpu():
    """Issue 11's case: an unfinished read_sum 'reads' 1 GiB in 0.05 ms, 7 times the copy ceiling."""
    _cache_ceilings_here()
    with pytest.raises(lh.ImpossibleMeasurement) as info:
        roofline.record_point("read_sum (lab 7)", 2**28, 2**30, _gpu_timing(0.05), chapter="07", source="lab")
    message = str(info.value)
    for part in ("21,475 GB/s", "2.4 times", "L2 cache 9,000 GB/s", "its device-memory ceiling is 3,000 GB/s", "2026-01-02",
                 "did not do the work it claims", "unfinished exercise", "Not recorded"):
        assert part in message, part
    assert len(roofline.load_points(HERE, include_labs=True)) == 0


def test_a_read_only_kernel_may_beat_the_copy_ceiling_but_not_the_l2():
    """Reading alone skips a copy's read-write turnarounds (the chapter's matrix-vector product reads 9% faster
    than the copy): only the fastest memory ceiling bounds bytes, with 5% of tolerance."""
    _cache_ceilings_here()
    nbytes = 2e9
    fine = roofline.record_point("read-only", 1e6, nbytes, _gpu_timing(nbytes / 3300e9 * 1e3), chapter="07")
    assert fine["gbps"] == pytest.approx(3300)  # 10% above the copy ceiling
    roofline.record_point("near L2", 1e6, nbytes, _gpu_timing(nbytes / 9400e9 * 1e3), chapter="07")  # +4%
    with pytest.raises(lh.ImpossibleMeasurement, match="9,000 GB/s"):
        roofline.record_point("above L2", 1e6, nbytes, _gpu_timing(nbytes / 9600e9 * 1e3), chapter="07")
    assert roofline.load_points(HERE)["name"].tolist() == ["read-only", "near L2"]


def test_without_an_l2_ceiling_the_copy_ceiling_bounds_the_bytes():
    _cache_ceilings_here(l2_gbs=None)
    with pytest.raises(lh.ImpossibleMeasurement, match="device memory \\(DRAM\\) 3,000 GB/s"):
        roofline.record_point("k", 1e6, 2e9, _gpu_timing(2e9 / 4000e9 * 1e3), chapter="07")


def test_record_point_refuses_flops_above_the_fma_ceiling_of_its_precision():
    _cache_ceilings_here()
    flops = 1.3e11  # in 2 ms: 65,000 GFLOP/s, 8% above the FP32 ceiling, twice the FP64 one
    with pytest.raises(lh.ImpossibleMeasurement) as info:
        roofline.record_point("fp32 kernel", flops, 1e6, _gpu_timing(), chapter="07")
    assert "65,000 GFLOP/s" in str(info.value) and f"FP32 FMA ceiling of {HERE}, 60,000 GFLOP/s" in str(info.value)
    assert "tensor_cores=True" in str(info.value)
    with pytest.raises(lh.ImpossibleMeasurement, match="2.2 times the FP64 FMA ceiling"):
        roofline.record_point("fp64 kernel", flops, 1e6, _gpu_timing(), chapter="07", precision="fp64")
    # a library GEMM on tensor cores beats the FMA roof for real: the chapter's FP64 cupy.matmul, 1.9 times it
    rec = roofline.record_point("cupy.matmul (FP64)", flops, 1e6, _gpu_timing(), chapter="07", precision="fp64",
                                tensor_cores=True)
    assert rec["gflops"] == pytest.approx(65000)
    # within the tolerance: a re-measured ceiling kernel lands a little above its own ceiling
    roofline.record_point("fma_chains (FP32)", 1.22e11, 1e6, _gpu_timing(), chapter="07")
    assert len(roofline.load_points(HERE)) == 2


def test_without_cached_ceilings_only_the_timing_is_checked():
    assert roofline.load_cached_ceilings(HERE) is None
    rec = roofline.record_point("fast", 1e15, 1e15, _gpu_timing(), chapter="07")
    assert rec["gbps"] == pytest.approx(5e8)


def test_record_point_validates_its_arguments():
    t = _gpu_timing()
    with pytest.raises(ValueError, match="chapter"):
        roofline.record_point("k", 1e9, 1e9, t, chapter="")
    with pytest.raises(ValueError, match="source"):
        roofline.record_point("k", 1e9, 1e9, t, chapter="07", source="student")
    with pytest.raises(ValueError, match="precision"):
        roofline.record_point("k", 1e9, 1e9, t, chapter="07", precision="fp16")
    with pytest.raises(ValueError, match="positive"):
        roofline.record_point("k", float("nan"), 1e9, t, chapter="07")
    with pytest.raises(TypeError, match="Timing"):
        roofline.record_point("k", 1e9, 1e9, 2.0, chapter="07")
    rec = roofline.record_point("k", np.int64(10**9), np.int64(10**9), t, chapter="07")  # NumPy counts are fine
    assert rec["intensity"] == 1.0


def test_lab_points_are_stored_apart_and_shown_only_on_request():
    t = _gpu_timing()
    roofline.record_point("saxpy", 2e8, 1.2e9, t, chapter="01")
    roofline.record_point("read_sum (lab 7)", 2.5e8, 1e9, t, chapter="07", source="lab")
    assert (roofline.device_cache_dir(HERE) / roofline.LAB_POINTS_FILE).exists()
    chapter = roofline.load_points(HERE)
    assert chapter["name"].tolist() == ["saxpy"] and chapter["source"].tolist() == ["chapter"]
    both = roofline.load_points(HERE, include_labs=True)
    assert both["name"].tolist() == ["saxpy", "read_sum (lab 7)"] and both["source"].tolist() == ["chapter", "lab"]
    roofline.clear_points(HERE, include_labs=False)
    assert roofline.load_points(HERE, include_labs=True)["name"].tolist() == ["read_sum (lab 7)"]
    roofline.clear_points(HERE)
    assert len(roofline.load_points(HERE, include_labs=True)) == 0


def test_check_against_ceilings_is_usable_on_a_run_of_its_own():
    """bench/roofline.py checks its points against the ceilings measured in the same run."""
    c = _ceilings()
    roofline.check_against_ceilings("ok", gflops=1000.0, gbps=2900.0, ceilings=c)
    with pytest.raises(lh.ImpossibleMeasurement, match="^bench: x"):
        roofline.check_against_ceilings("bench: x", gflops=1000.0, gbps=20000.0, ceilings=c)
    with pytest.raises(AssertionError, match="not recorded"):
        rx._expect(np.array([1.0, 2.0]), 1.0, "a kernel")


# ------------------------------------------------------------------------------- the copy measurement

@pytest.mark.parametrize("kernel, dtype", [("stream_copy", np.float32), ("stream_copy", np.float64),
                                           ("stream_copy16", None)])
def test_time_copy_really_copies_and_counts_read_plus_write(kernel, dtype, monkeypatch):
    import labhelpers.timing as timing

    calls = []
    monkeypatch.setattr(timing, "benchmark", lambda fn, **kw: (fn(), calls.append(kw))[0] or
                        Timing(label=kw["label"], times_ms=None, nbytes=kw["nbytes"]))
    x = np.random.default_rng(0).random(64).astype(np.float64)  # 512 bytes, a whole number of 16-byte elements
    src, out = cuda.to_device(x), cuda.device_array(64, dtype=np.float64)
    t = roofline.time_copy(src, out, kernel=kernel, dtype=dtype, threads=32, grid="one element per thread")
    np.testing.assert_array_equal(out.copy_to_host(), x)
    assert t.nbytes == 2 * 512 and calls[0]["number"] == 5 and calls[0]["repeat"] == 10
    assert kernel in t.label


def test_time_copy_rejects_what_it_cannot_copy():
    with pytest.raises(ValueError, match="library"):
        roofline.time_copy(cuda.device_array(4), kernel="memcpy")
    with pytest.raises(ValueError, match="multiple of 16"):
        roofline.time_copy(cuda.device_array(3, dtype=np.float32), kernel="stream_copy16")


@sim_only
def test_the_library_copy_needs_cupy():
    with pytest.raises(lh.GPUOnlyError, match="CuPy"):
        roofline.time_copy(cuda.device_array(4))


def test_there_is_one_copy_measurement():
    """The copy ceiling is timed in one place: no other module of the package builds its own copy timing."""
    for path in (ROOT / "src" / "labhelpers").rglob("*.py"):
        text = path.read_text()
        assert "__setitem__(slice(None)" not in text, (
            f"{path.relative_to(ROOT)} times a copy by hand: call labhelpers.roofline.time_copy(src, ...) (the one "
            "copy measurement, bytes counted read + written), or ctx.copy_bandwidth_gbs() in a bench")
    bench = (ROOT / "bench" / "common.py").read_text()
    assert "roofline.measure_dram_bandwidth()" in bench and "__setitem__" not in bench


# ---------------------------------------------------------------------------------- tables for reading

def test_format_table_prints_integers_as_integers_and_rounds_rates():
    table = pd.DataFrame({"kernel": ["a", "b"], "threads": [256.0, np.nan], "blocks": [1048576, 264],
                          "gbps": [4143.340901, 3807.4], "intensity": [682.666667, 0.166667],
                          "fraction of roof": [0.8123, 0.5], "ok": [True, False]})
    shown = roofline.format_table(table)
    assert shown["threads"].tolist() == ["256", "–"] and shown["blocks"].tolist() == ["1,048,576", "264"]
    assert shown["gbps"].tolist() == ["4,143", "3,807"] and shown["intensity"].tolist() == ["683", "0.167"]
    assert roofline.format_table(pd.DataFrame({"ms": [0.06, 0.25, 2.0]}))["ms"].tolist() == ["0.0600", "0.250", "2.00"]
    assert shown["fraction of roof"].tolist() == ["81%", "50%"] and shown["ok"].tolist() == [True, False]
    assert roofline.format_table(table, {"gbps": "{:,.1f}"})["gbps"].tolist() == ["4,143.3", "3,807.4"]
    assert table["gbps"].iloc[0] == 4143.340901  # the original is untouched
    ref = pd.DataFrame({"ms": [1.5, None], "x": [None, None]})  # a reference file's nulls
    assert roofline.format_table(ref)["ms"].tolist() == ["1.50", "–"]


# ---------------------------------------------------------------------------------------- plotting

def test_roofline_title_names_the_gpu_once_and_says_what_each_date_dates():
    ref = _ceilings(source="reference", label="reference: Test GPU (2026-11-22)", details={"date": "2026-11-22"})
    title, name = roofline.roofline_title(ref, "reference: Test GPU (2026-11-21)")
    assert title == "Roofline of the reference Test GPU (ceilings measured 2026-11-22, kernels 2026-11-21)"
    assert name == "kernels"
    title, _ = roofline.roofline_title(ref, "reference: Test GPU (2026-11-22)")
    assert title == "Roofline of the reference Test GPU (measured 2026-11-22)"
    live = _ceilings(label="measured on Test GPU (2026-11-23)", details={"date": "2026-11-23"})
    assert roofline.roofline_title(live, "this GPU: Test GPU")[0] == \
        "Roofline of this GPU, Test GPU (ceilings measured 2026-11-23)"
    title, name = roofline.roofline_title(ref, "reference: Other GPU (2026-01-01)")
    assert "Test GPU" in title and name == "reference: Other GPU (2026-01-01)"


def test_draw_roofline_can_write_names_beside_the_points():
    fig, ax = plt.subplots()
    points = pd.DataFrame({"name": ["a", "b"], "intensity": [0.25, 100.0], "gflops": [700.0, 50000.0],
                           "precision": ["fp32", "fp64"]})
    roofline.draw_roofline(ax, _ceilings(), points, point_labels="beside")
    assert {"a", "b"} <= {t.get_text() for t in ax.texts}
    with pytest.raises(ValueError, match="point_labels"):
        roofline.draw_roofline(ax, _ceilings(), points, point_labels="above")
    plt.close(fig)



def test_draw_roofline_draws_roofs_and_skips_nan_points():
    fig, ax = plt.subplots()
    points = pd.DataFrame({"name": ["a", "b", "c"], "intensity": [0.25, np.nan, 100.0],
                           "gflops": [700.0, 5.0, 50000.0]})
    roofline.draw_roofline(ax, _ceilings(), points, datasheet=roofline.datasheet_ceilings("NVIDIA H100 80GB HBM3"))
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
    legend = [t.get_text().strip() for t in ax.get_legend().get_texts()]
    assert "a" in legend and "c" in legend and "b" not in legend  # each point a legend entry: no overlaps
    assert any(t.startswith("ridge: 20.0 FLOP/B") for t in legend)
    plt.close(fig)


def test_draw_roofline_without_ceilings_says_so():
    fig, ax = plt.subplots()
    empty = _ceilings(dram_gbs=float("nan"), l2_gbs=None, fp32_gflops=float("nan"), fp64_gflops=None)
    roofline.draw_roofline(ax, empty, None)
    assert any("not measured" in t.get_text() for t in ax.texts)
    plt.close(fig)


def test_widgets_build():
    points = pd.DataFrame({"name": ["a"], "intensity": [1.0], "gflops": [1000.0]})
    assert roofline_fig.roofline_explorer(_ceilings(), points).children
    sweep = pd.DataFrame({"nfma": [1, 2], "intensity": [0.25, 0.5], "gflops": [750.0, np.nan]})
    assert roofline_fig.sweep_explorer(_ceilings(), sweep, "test").children
    plt.close("all")


def test_chapter_figures_accept_nan_tables():
    hyg = pd.DataFrame({"measurement": ["a", "b"], "ms": [np.nan, 1.0], "what_it_measures": ["", ""]})
    fig, ax = plt.subplots()
    assert roofline_fig.plot_timing_hygiene(hyg, ax=ax, label="test") is fig
    fig, axes = plt.subplots(1, 2)
    gemm = lh.load_reference("ch07_skewed_gemm").table.copy()  # the drawing is under test: no sweep, no GPU time
    gemm[["median_ms", "min_ms", "spread", "gbps", "gflops", "issue_ms"]] = np.nan  # as the simulator's sweep gives
    assert roofline_fig.plot_skewed_gemm(gemm, axes=axes, label="test", ceilings=_ceilings()) is fig
    plt.close("all")


def test_chapter_figures_draw_the_reference_data_on_new_figures():
    """Chapter 7's static plots: ``plot_x(table, *, ax=None, label=...)`` returns a new Figure, titled with the label."""
    ceilings = roofline.reference_ceilings()
    hygiene = lh.load_reference("ch07_timing_hygiene")
    sweep = lh.load_reference("ch07_intensity_sweep")
    gemm = lh.load_reference("ch07_skewed_gemm")
    fft = lh.load_reference("ch07_fft_crossover")
    variants = lh.load_reference("ch07_copy_variants")
    figures = [
        roofline_fig.plot_timing_hygiene(hygiene.table, label=hygiene.label),
        roofline_fig.plot_copy_variants(variants.table, label=variants.label, datasheet_gbs=3350.0),
        roofline_fig.plot_sweep_times(sweep.table, label=sweep.label, ridge_nfma=ceilings.balance() * 4),
        roofline_fig.plot_skewed_gemm(gemm.table, label=gemm.label, ceilings=ceilings),
        roofline_fig.plot_fft_crossover(fft.table, label=fft.label, lecture_n=rx.LECTURE_FFT_CROSSOVER,
                                        crossovers=rx.fft_crossover_points(fft.table)),
    ]
    for fig, ref in zip(figures, (hygiene, variants, sweep, gemm, fft)):
        assert isinstance(fig, matplotlib.figure.Figure)
        assert ref.label in fig.axes[0].get_title()
    assert len(figures[3].axes) == 2
    plt.close("all")


# ---------------------------------------------------------------------------------------- profiler

LONG_CSV = '''running the program...
==PROF== Connected to process 4242
==PROF== Profiling "fma_per_element": 0%....50%....100% - 3 passes
"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size","Device","CC","Section Name","Metric Name","Metric Unit","Metric Value"
"0","4242","python3","127.0.0.1","cudapy::fma_per_element","1","7","(256, 1, 1)","(1056, 1, 1)","0","9.0","Command line profiler metrics","dram__bytes_read.sum","byte","67,108,864"
"0","4242","python3","127.0.0.1","cudapy::fma_per_element","1","7","(256, 1, 1)","(1056, 1, 1)","0","9.0","Command line profiler metrics","lts__t_sector_hit_rate.pct","%","12.5"
"0","4242","python3","127.0.0.1","cudapy::fma_per_element","1","7","(256, 1, 1)","(1056, 1, 1)","0","9.0","Command line profiler metrics","l1tex__t_sector_hit_rate.pct","%","n/a"
"0","4242","python3","127.0.0.1","cudapy::fma_per_element","1","7","(256, 1, 1)","(1056, 1, 1)","0","9.0","Command line profiler metrics","sm__warps_active.avg.pct_of_peak_sustained_active","%","87,50"
==PROF== Disconnected from process 4242
'''

WIDE_CSV = '''"ID","Kernel Name","dram__bytes_read.sum","gpu__time_duration.sum"
"","","byte","nsecond"
"0","fma_per_element","1,024","5,000"
'''


def test_parse_ncu_csv_long_layout():
    table = profiler.parse_ncu_csv(LONG_CSV)
    values = dict(zip(table["metric"], table["value"]))
    assert values["dram__bytes_read.sum"] == 67108864
    assert values["lts__t_sector_hit_rate.pct"] == 12.5
    assert math.isnan(values["l1tex__t_sector_hit_rate.pct"])
    assert values["sm__warps_active.avg.pct_of_peak_sustained_active"] == 87.5  # decimal comma
    assert table.loc[0, "description"] == "DRAM bytes read" and table.loc[0, "unit"] == "byte"
    assert (table["kernel"] == "cudapy::fma_per_element").all()


def test_parse_ncu_csv_wide_layout_and_errors():
    table = profiler.parse_ncu_csv(WIDE_CSV)
    values = dict(zip(table["metric"], table["value"]))
    assert values == {"dram__bytes_read.sum": 1024, "gpu__time_duration.sum": 5000}
    assert table.loc[table["metric"] == "gpu__time_duration.sum", "unit"].item() == "nsecond"
    with pytest.raises(ValueError, match="no CSV"):
        profiler.parse_ncu_csv("==PROF== ERR_NVGPUCTRPERM\n")


@sim_only
def test_profiler_explains_why_it_cannot_run():
    assert "no GPU" in profiler.ncu_unavailable_reason()
    with pytest.raises(profiler.ProfilerUnavailable, match="no GPU"):
        profiler.profile_fma_per_element()


def test_profiler_explains_its_failures():
    assert "administrators" in profiler._explain_failure("==ERROR== ERR_NVGPUCTRPERM - ...", 1)
    assert "no kernel matched" in profiler._explain_failure("==WARNING== No kernels were profiled.", 0)


def test_ncu_command_line():
    cmd = profiler.ncu_command(Path("t.py"), "fma_per_element", ["a.sum", "b.pct"], ncu="ncu",
                               options={"--print-units"})
    assert cmd[0] == "ncu" and "--csv" in cmd and "regex:fma_per_element" in cmd and "a.sum,b.pct" in cmd
    assert cmd[cmd.index("--print-units") + 1] == "base" and "--print-metric-name" not in cmd
    assert cmd[-2:] == [sys.executable, "t.py"]


def test_achieved_intensity():
    report = pd.DataFrame({"metric": ["smsp__sass_thread_inst_executed_op_ffma_pred_on.sum",
                                      "smsp__sass_thread_inst_executed_op_fadd_pred_on.sum",
                                      "smsp__sass_thread_inst_executed_op_fmul_pred_on.sum",
                                      "dram__bytes_read.sum", "dram__bytes_write.sum"],
                           "value": [100.0, 10.0, 0.0, 30.0, 20.0]})
    assert profiler.achieved_intensity(report) == pytest.approx(210 / 50)


def test_nvtx_range_degrades_gracefully(monkeypatch, capsys):
    monkeypatch.setattr(profiler, "nvtx_module", lambda: None)
    monkeypatch.setattr(profiler, "_nvtx_warned", False)
    ran = []
    with profiler.nvtx_range("first"):
        ran.append(1)
    with profiler.nvtx_range("second"):
        ran.append(2)
    out = capsys.readouterr().out
    assert ran == [1, 2] and out.count("not installed") == 1 and "pip install nvtx" in out


def test_nvtx_range_uses_the_package_when_present(monkeypatch):
    calls = []

    class Annotate:
        def __init__(self, name, color):
            calls.append((name, color))

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

    monkeypatch.setitem(sys.modules, "nvtx", types.SimpleNamespace(annotate=Annotate))
    assert profiler.nvtx_available()
    with profiler.nvtx_range("work", color="green"):
        pass
    assert calls == [("work", "green")]


def test_matvec_checker_rejects_skeleton_and_typical_mistakes():
    with pytest.raises(lh.CheckFailed, match="still 0"):
        ex.check_matvec_counts(lambda m, n, s: (0, 0))
    with pytest.raises(lh.CheckFailed, match="two"):
        ex.check_matvec_counts(lambda m, n, s: (m * n, (m * n + m + n) * s))
    with pytest.raises(lh.CheckFailed, match="A only"):
        ex.check_matvec_counts(lambda m, n, s: (2 * m * n, m * n * s))
    with pytest.raises(lh.CheckFailed, match="itemsize"):
        ex.check_matvec_counts(lambda m, n, s: (2 * m * n, (m * n + m + n) * 4))
    with pytest.raises(lh.CheckFailed, match="^Wrong type.*None.*2 numbers, \\(flops, nbytes\\)"):
        ex.check_matvec_counts(lambda m, n, s: None)


def test_roofline_time_checker_rejects_skeleton_and_typical_mistakes():
    with pytest.raises(lh.CheckFailed, match="still 0"):
        ex.check_roofline_time(lambda f, b, bw, p: 0.0)
    with pytest.raises(lh.CheckFailed, match="added"):
        ex.check_roofline_time(lambda f, b, bw, p: (b / (bw * 1e9) + f / (p * 1e9)) * 1e3)
    with pytest.raises(lh.CheckFailed, match="faster"):
        ex.check_roofline_time(lambda f, b, bw, p: min(b / (bw * 1e9), f / (p * 1e9)) * 1e3)
    with pytest.raises(lh.CheckFailed, match="units"):
        ex.check_roofline_time(lambda f, b, bw, p: max(b / (bw * 1e9), f / (p * 1e9)))


def test_ridge_checker_rejects_skeleton_and_typical_mistakes():
    with pytest.raises(lh.CheckFailed, match="still 0"):
        ex.check_ridge_fma_count(lambda bw, p, s: 0.0)
    with pytest.raises(lh.CheckFailed, match="stored"):
        ex.check_ridge_fma_count(lambda bw, p, s: s * p / bw / 2)
    with pytest.raises(lh.CheckFailed, match="two flops"):
        ex.check_ridge_fma_count(lambda bw, p, s: 2 * s * p / bw)


@cuda.jit
def _read_sum_skeleton(x, out):  # the lab's skeleton, unsolved
    t = cuda.grid(1)
    stride = cuda.gridsize(1)  # noqa: F841
    i = t  # noqa: F841
    acc = float32(0)
    if t < out.size:
        out[t] = acc


@cuda.jit
def _read_sum_one_element(x, out):
    t = cuda.grid(1)
    acc = float32(0)
    if t < x.size:
        acc += x[t]
    if t < out.size:
        out[t] = acc


@cuda.jit
def _read_sum_unguarded(x, out):
    t = cuda.grid(1)
    stride = cuda.gridsize(1)
    i = t
    acc = float32(0)
    while i < x.size + stride:  # reads past the end
        acc += x[i]
        i += stride
    out[t] = acc


def test_read_sum_checker_rejects_skeleton_and_typical_mistakes():
    with pytest.raises(lh.CheckFailed, match="(?i)every sum is 0"):
        ex.check_read_sum(_read_sum_skeleton)
    with pytest.raises(lh.CheckFailed, match="(?i)grid-stride loop.*single element"):
        ex.check_read_sum(_read_sum_one_element)
    with pytest.raises(lh.CheckFailed):
        ex.check_read_sum(_read_sum_unguarded)


@sim_only
def test_time_read_sum_runs_without_gpu_timing():
    t = ex.time_read_sum(_solutions().read_sum)
    assert not t.is_gpu_timing and "no GPU timing" in str(t)
    assert len(roofline.load_points(HERE, include_labs=True)) == 0  # nothing recorded without a GPU timing


def test_time_read_sum_times_nothing_until_the_check_passes(monkeypatch):
    monkeypatch.setattr(rm.timing, "benchmark", lambda *a, **k: pytest.fail("an unchecked kernel must not be timed"))
    with pytest.raises(lh.CheckFailed, match="(?i)not timed until it is correct.*every sum is 0"):
        ex.time_read_sum(_read_sum_skeleton)


def test_time_read_sum_records_a_lab_point_after_the_check(monkeypatch):
    def gpu_benchmark(fn, *, nbytes, flops, label, **kwargs):  # what a GPU would return
        fn()
        return Timing(label=label, times_ms=(0.5, 0.5, 0.5), nbytes=nbytes, flops=flops)

    monkeypatch.setattr(rm.timing, "benchmark", gpu_benchmark)
    t = ex.time_read_sum(_solutions().read_sum, n=4096)
    assert t.gbps == pytest.approx(4 * 4096 / 0.5e-3 / 1e9)
    assert len(roofline.load_points(HERE)) == 0  # not among the chapters' points
    labs = roofline.load_points(HERE, include_labs=True)
    assert labs["name"].tolist() == [ex.READ_SUM_POINT] and labs["source"].tolist() == ["lab"]
    ex.time_read_sum(_solutions().read_sum, n=4096, record=False)
    assert len(roofline.load_points(HERE, include_labs=True)) == 1


def test_measure_ceilings_caches_per_device(monkeypatch):
    """The toolkit's logic with the GPU parts replaced: measure once, write the cache, read it back."""
    import labhelpers.device as device

    gpu = DeviceInfo(backend="gpu", name="NVIDIA H100 80GB HBM3", compute_capability=(9, 0), sm_count=132,
                     clock_khz=1_980_000)
    calls = []

    def fake(value, unit):
        def measure(*args, **kwargs):
            calls.append(value)
            return rm.CeilingMeasurement(value, unit, f"fake {value}", ((f"fake {value}", value),))
        return measure

    monkeypatch.setattr(rm.backend, "require_gpu", lambda what, **kw: None)
    monkeypatch.setattr(device, "device_info", lambda: gpu)
    monkeypatch.setattr(rm, "measure_dram_bandwidth", fake(3000.0, "GB/s"))

    def stream(*, copy):  # the DRAM ceiling: the copy's rows, then a faster triad
        calls.append(3100.0)
        triad = {"kernel": "triad (saxpy_vec4)", "gbps": 3100.0, "how": "fake triad"}
        return rm.CeilingMeasurement(3100.0, "GB/s", "fake triad", (*copy.tried, triad))

    monkeypatch.setattr(rm, "measure_stream_bandwidth", stream)
    monkeypatch.setattr(rm, "measure_l2_bandwidth", fake(9000.0, "GB/s"))
    monkeypatch.setattr(rm, "measure_fma_peak", lambda dtype: fake(
        60000.0 if np.dtype(dtype) == np.float32 else 30000.0, "GFLOP/s")())
    first = roofline.measure_ceilings(progress=False)
    assert (first.dram_gbs, first.l2_gbs, first.fp32_gflops, first.fp64_gflops) == (3100, 9000, 60000, 30000)
    assert first.details["how"]["dram_gbs"] == "fake triad" and "NVIDIA H100 80GB HBM3" in first.label
    # the copies alone stay the copy yardstick's table; the triads and the copy ceiling are kept beside them
    assert first.details["tried"]["dram_gbs"] == [{"how": "fake 3000.0", "value": 3000.0}]
    assert [r["kernel"] for r in first.details["tried"]["dram_triads"]] == ["triad (saxpy_vec4)"]
    assert (first.details["copy_gbs"], first.details["copy_how"]) == (3000.0, "fake 3000.0")
    assert (roofline.device_cache_dir("NVIDIA H100 80GB HBM3") / "ceilings.json").exists()
    assert roofline.measure_ceilings(progress=False) == first and len(calls) == 5  # from the cache
    roofline.measure_ceilings(progress=False, refresh=True)
    assert len(calls) == 10
    peak, mhz = first.fp32_peak_at_recorded_clock()
    assert mhz == 1980 and peak == pytest.approx(132 * 128 * 2 * 1.98)


def test_measure_dram_bandwidth_launches_every_variant_and_keeps_the_fastest(monkeypatch):
    """The DRAM toolkit's wiring under the simulator: each variant's views, grid and kernel really copy."""
    import labhelpers.timing as timing

    monkeypatch.setattr(rm.backend, "require_gpu", lambda what, **kw: None)
    monkeypatch.setattr(rm, "_free_bytes", lambda: 2**30)
    library = rm.HAS_CUPY  # where CuPy is installed (a GPU), CuPy's own copy is timed after the variants
    expected = len(roofline.COPY_VARIANTS) + library
    speeds = iter(range(1000, 1000 + 100 * expected, 100))
    copied = []

    def fake_benchmark(fn, *, nbytes, label, **kwargs):  # what time_copy calls for every copy
        fn()  # one launch of the variant, in the simulator
        copied.append(nbytes)
        return Timing(label=label, times_ms=(nbytes / (next(speeds) * 1e6),), nbytes=nbytes)

    monkeypatch.setattr(timing, "benchmark", fake_benchmark)
    result = rm.measure_dram_bandwidth(nbytes=4096 + 8)
    assert len(result.tried) == expected == len(copied)
    assert [r["gbps"] for r in result.tried] == pytest.approx([1000 + 100 * k for k in range(len(copied))])
    assert result.value == pytest.approx(result.tried[-1]["gbps"]) and result.how == result.tried[-1]["how"]
    variants = result.tried[:len(roofline.COPY_VARIANTS)]
    assert {r["access_bytes"] for r in variants} == {4, 8, 16}
    if library:
        assert result.tried[-1]["kernel"] == rm.LIBRARY_COPY_NAME and result.tried[-1]["access_bytes"] is None
    assert set(copied) == {2 * 4096}  # rounded down to whole 16-byte elements, counted read + written
    copied.clear()
    speeds = iter(range(1000, 1000 + 100 * len(roofline.COPY_VARIANTS), 100))
    only_ours = rm.measure_dram_bandwidth(nbytes=4096 + 8, library=False)  # the streaming copies alone
    assert [r["access_bytes"] for r in only_ours.tried] == [r["access_bytes"] for r in variants]


def test_measure_stream_bandwidth_adds_triads_to_the_copies_and_keeps_the_fastest(monkeypatch):
    """The DRAM ceiling's wiring under the simulator: each triad really computes out = a x + y; the copies of the
    copy measurement it is given are kept, not measured again, and the fastest stream of all is the ceiling."""
    import labhelpers.timing as timing

    monkeypatch.setattr(rm.backend, "require_gpu", lambda what, **kw: None)
    monkeypatch.setattr(rm, "_free_bytes", lambda: 2**30)
    copy = rm.CeilingMeasurement(5000.0, "GB/s", "a copy", ({"kernel": "stream_copy16", "gbps": 5000.0,
                                                               "how": "a copy"},))
    speeds = iter([4000.0, 6000.0])
    streamed = []

    def fake_benchmark(fn, *, nbytes, label, **kwargs):  # what time_triad calls for every triad
        fn()
        streamed.append(nbytes)
        return Timing(label=label, times_ms=(nbytes / (next(speeds) * 1e6),), nbytes=nbytes)

    monkeypatch.setattr(timing, "benchmark", fake_benchmark)
    result = rm.measure_stream_bandwidth(nbytes=3 * 1024 + 8, copy=copy)  # 2/3 of it: 2053 bytes
    assert [r["kernel"] for r in result.tried] == ["stream_copy16"] + ["triad (saxpy_vec4)"] * 2
    assert result.value == pytest.approx(6000.0) and result.how.startswith("triad out = a x + y")
    assert set(streamed) == {3 * 4 * 512}  # three float32 buffers of 2053 // 16 groups of four each
    speeds = iter([4000.0, 4500.0])
    assert rm.measure_stream_bandwidth(nbytes=3 * 1024, copy=copy).how == "a copy"  # a copy may stay the best


def test_time_triad_computes_the_triad_and_refuses_bad_input(monkeypatch):
    import labhelpers.timing as timing

    monkeypatch.setattr(timing, "benchmark", lambda fn, *, nbytes, label, **kw: (fn(), Timing(label, None, nbytes))[1])
    x, y = cuda.to_device(np.arange(11, dtype=np.float32)), cuda.to_device(np.ones(11, dtype=np.float32))
    out = cuda.device_array(11, dtype=np.float32)
    t = rm.time_triad(x, y, out, threads=32)
    assert np.array_equal(out.copy_to_host(), np.arange(11) + 1.0) and t.nbytes == 3 * 44  # a = 1
    with pytest.raises(lh.ArgumentError, match="kernel"):
        rm.time_triad(x, y, out, kernel="saxpy")
    with pytest.raises(lh.ArgumentError, match="shape"):
        rm.time_triad(x, y, cuda.device_array(12, dtype=np.float32))


@sim_only
def test_fma_report_falls_back_to_the_saved_report(tmp_path, monkeypatch):
    monkeypatch.setenv("LABHELPERS_REFERENCE_DIR", str(tmp_path))
    table, label, note = profiler.fma_report_or_reference()
    assert len(table) == 0 and "No saved report" in note and math.isnan(profiler.achieved_intensity(table))
    report = profiler.parse_ncu_csv(LONG_CSV)
    save_reference("ch07_ncu_report", report, tmp_path, meta=META)
    table, label, note = profiler.fma_report_or_reference()
    assert "Test GPU" in label and "no GPU" in note and table["value"].notna().sum() == 3


# ------------------------------------------------------------------- compute-sanitizer and its two bugs

def test_reverse_in_block_and_its_race():
    x = np.arange(2 * rk.REVERSE_BLOCK, dtype=np.float32)
    np.testing.assert_array_equal(rk.run_reverse_in_block(x), rk.reverse_in_block_reference(x))
    racy = lh.check_races(rk.reverse_in_block_no_barrier, 2, rk.REVERSE_BLOCK, x, np.zeros_like(x))
    assert not racy.ok and {r.kind for r in racy.races} == {"RAW"}
    assert lh.check_races(rk.reverse_in_block, 2, rk.REVERSE_BLOCK, x, np.zeros_like(x)).ok
    with pytest.raises(lh.LaunchConfigError):
        rk.run_reverse_in_block(np.zeros(65, dtype=np.float32))


@sim_only
def test_scale_unguarded_is_stopped_by_the_simulator_and_scale_is_right():
    x = np.arange(100, dtype=np.float32)
    with pytest.raises(IndexError):
        rk.scale_unguarded[1, 128](x, np.zeros(100, dtype=np.float32), np.float32(2))
    out = np.zeros(100, dtype=np.float32)
    rk.scale[1, 128](x, out, np.float32(2))
    np.testing.assert_array_equal(out, 2 * x)
    with pytest.raises(lh.GPUOnlyError):
        rk.sanitizer_target("scale_unguarded")
    with pytest.raises(profiler.ProfilerUnavailable, match="no GPU"):
        profiler.run_sanitizer("memcheck", "print(1)")


def test_sanitizer_helpers():
    cmd = profiler.sanitizer_command("racecheck", "s.py", sanitizer="cs")
    assert cmd[:3] == ["cs", "--tool", "racecheck"] and "--racecheck-report" in cmd and cmd[-1] == "s.py"
    memcheck = profiler.sanitizer_command("memcheck", "s.py")
    assert "--racecheck-report" not in memcheck
    at = memcheck.index("--report-api-errors")  # numba-cuda's driver probes would flood the report otherwise
    assert memcheck[at + 1] == "no" and memcheck.index("--tool") < at < memcheck.index("s.py")
    with pytest.raises(ValueError):
        profiler.sanitizer_command("leakcheck", "s.py")
    with pytest.raises(ValueError):
        rk.sanitizer_target("nothing")
    mangled = ("========= Invalid __global__ read of size 4 bytes at labhelpers::kernels::roofline::scale_unguarded"
               "[abi:v1,cw51cXTLSUwv1sD](Array<float, (int)1, C, mutable, aligned>, float)+0x1c0 in "
               "/tmp/site/labhelpers/kernels/roofline.py:510")
    short = profiler.shorten_sanitizer_line(mangled)
    assert short == "========= Invalid __global__ read of size 4 bytes at scale_unguarded(...)+0x1c0 in roofline.py:510"
    assert profiler._short_paths("/opt/x/site-packages/numba/cuda/dispatcher.py:748: w") == "dispatcher.py:748: w"
    assert set(rk.SANITIZER_TARGETS.values()) <= set(profiler.SANITIZER_TOOLS)


# ------------------------------------------------------------------------------- library or hand-written

def test_fft_crossover_points():
    table = pd.DataFrame({"n": [16, 64, 256, 1024], "numpy_ms": [0.01, 0.02, 0.05, 0.2],
                          "cupy_ms": [0.02, 0.015, 0.02, 0.03], "cupy_copies_ms": [0.1, 0.1, 0.3, 0.1]})
    points = rx.fft_crossover_points(table)
    assert points["on_gpu"] == 64  # faster from 64 on, and stays faster
    assert points["with_copies"] == 1024  # faster at 1024 only (256 is slower again)
    assert math.isnan(rx.fft_crossover_points(table.assign(cupy_ms=1.0))["on_gpu"])


@sim_only
def test_fft_crossover_is_gpu_only_under_the_simulator():
    with pytest.raises(lh.GPUOnlyError):
        rx.fft_crossover(sizes=(16,))


def test_fft_crossover_reference_and_its_figure():
    ref = lh.load_reference("ch07_fft_crossover")
    table = ref.table
    assert list(table.columns) == ["n", "numpy_ms", "cupy_ms", "cupy_copies_ms", "speedup", "speedup_copies"]
    np.testing.assert_allclose(table["speedup"], table["numpy_ms"] / table["cupy_ms"])
    np.testing.assert_allclose(table["speedup_copies"], table["numpy_ms"] / table["cupy_copies_ms"])
    points = rx.fft_crossover_points(table)
    # chapter 7: with the data on the GPU, cuFFT's GPU time (held clock) beats NumPy's whole call at every length
    # measured; with the copies in and out (host clock) the GPU wins only from a larger size on
    assert points["on_gpu"] == table["n"].min() and (table["speedup"] > 1).all()
    assert points["on_gpu"] < points["with_copies"] and (table["speedup_copies"] < 1).any()
    assert points["with_copies"] <= table["n"].max() and ref.meta.get("cpu")
    fig, ax = plt.subplots()
    assert roofline_fig.plot_fft_crossover(table, ax=ax, label=ref.label, lecture_n=rx.LECTURE_FFT_CROSSOVER,
                                           crossovers=points) is fig
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert f"the lecture's crossover: {rx.LECTURE_FFT_CROSSOVER:,}" in legend
    assert f"GPU faster from n = {points['on_gpu']:,.0f} (data on the GPU)" in legend
    assert ref.gpu in ax.get_title()
    empty, ax2 = plt.subplots()
    assert roofline_fig.plot_fft_crossover(table.iloc[:0], ax=ax2, label="none") is empty
    plt.close("all")


def test_chapter7_states_the_reference_fft_crossover():
    """The FFT sentence is computed in a cell; its stored output matches the reference data."""
    nb = json.loads((ROOT / "book/07_profiling_roofline.ipynb").read_text())
    points = rx.fft_crossover_points(lh.load_reference("ch07_fft_crossover").table)
    outputs = ["".join(o.get("text", "")) for c in nb["cells"] if c["cell_type"] == "code"
               and "fft_crossover_points" in "".join(c["source"]) for o in c.get("outputs", [])]
    want = (f"cupy.fft is faster from n = {points['on_gpu']:,.0f} with the data already on the GPU, and from "
            f"n = {points['with_copies']:,.0f} with the copies in and out. The lecture's cuFFT against FFTW: "
            f"{rx.LECTURE_FFT_CROSSOVER:,}.")
    assert any(want in text for text in outputs), "re-execute book/07_profiling_roofline.ipynb"


def test_library_comparison_reads_the_reference_data():
    table = rx.library_comparison()
    assert list(table["unit"]) == ["GB/s", "GB/s", "GFLOP/s", "GFLOP/s"]
    flight = lh.load_reference("ch06_loads_in_flight").table
    assert table.loc[0, "hand-written rate"] == flight["gbps"].max()
    assert table.loc[1, "hand-written rate"] == pytest.approx(roofline.reference_ceilings().dram_gbs)
    ratio = table["hand-written rate"] / table["library rate"]
    np.testing.assert_allclose(table["hand-written / library"], ratio)


@gpu_only
def test_fft_crossover_on_this_gpu():
    pytest.importorskip("cupy")
    table = rx.fft_crossover(sizes=(64, 4096), repeat=3)
    assert list(table["n"]) == [64, 4096] and (table[["numpy_ms", "cupy_ms", "cupy_copies_ms"]] > 0).all().all()
    np.testing.assert_allclose(table["speedup"], table["numpy_ms"] / table["cupy_ms"])
    points = rx.fft_crossover_points(table)
    assert set(points) == {"on_gpu", "with_copies"}
    assert all(math.isnan(p) or p in (64, 4096) for p in points.values())


@gpu_only
def test_sanitizer_reports_the_two_bugs():
    if profiler.sanitizer_path() is None:
        pytest.skip("compute-sanitizer is not installed here")
    bad = profiler.sanitizer_report("scale_unguarded")
    assert not bad["line"].str.contains("CUDA_ERROR_INVALID_VALUE").any()  # no driver-probe noise
    assert bad["line"].str.contains("Invalid __global__").any()
    good = profiler.sanitizer_report("scale")
    assert good["line"].str.contains("0 errors").any()
    race = profiler.sanitizer_report("reverse_in_block_no_barrier")
    assert race["line"].str.contains("Race reported").any()


# --------------------------------------------------- drift check: the prose quotes the reference data

from prose import markdown as _markdown  # noqa: E402  (the drift checks' one reading of the prose)


def _range(lo: str, hi: str) -> str:
    """Two figures as the prose gives a range: one figure when they round alike."""
    return lo if lo == hi else f"{lo} to {hi}"


def _chapter7_figures() -> list[str]:
    hy = lh.load_reference("ch07_timing_hygiene").table.set_index("measurement")["ms"]
    first, unsync, synced, events = hy.iloc[0], hy.iloc[1], hy.iloc[2], hy.iloc[3]
    rep = lh.load_reference("ch07_timing_repeats").table
    gap = (rep["host_ms"] - rep["event_ms"]) * 1e3
    c = roofline.reference_ceilings()
    sheet = lh.load_reference("ch07_ceilings").table.set_index("ceiling")["datasheet"]
    fp64_clock = roofline.peak_at_clock_gflops(c.details["sm_count"], c.details["clock_khz"],
                                               roofline.FP64_LANES_PER_SM[(9, 0)])
    pts = lh.load_reference("ch07_roofline_points").table.set_index("name")
    sw = lh.load_reference("ch07_intensity_sweep").table.set_index("nfma")
    ncu = lh.load_reference("ch07_ncu_report").table.set_index("metric")["value"]
    gm = lh.load_reference("ch07_skewed_gemm").table.set_index("n")
    lib = rx.library_comparison()["hand-written / library"]
    stream = pts.loc[["SAXPY (chapter 1 kernel)", "fma_per_element, 4 FMA/element"], "gbps"] / 1e3
    low = sw.loc[sw.index <= 16]
    n = 2**26
    at64 = max(rk.fma_per_element_bytes(n, 4) / c.dram_gbs, rk.fma_per_element_flops(n, 64) / c.fp32_gflops) / 1e6
    rd, wr = ncu["dram__bytes_read.sum"] / 1e6, ncu["dram__bytes_write.sum"] / 1e6
    squareish = gm.loc[[1024, 512, 256, 128, 64], "gflops"]
    thin = gm.loc[[32, 16, 8, 4, 2], "gbps"] / 1e3
    n2 = gm.loc[2]
    roof2 = n2["intensity"] * c.dram_gbs
    fft = lh.load_reference("ch07_fft_crossover").table.set_index("n")
    fft_points = rx.fft_crossover_points(fft.reset_index())
    assert rep["event_ms"].iloc[0] <= rep["event_ms"].median() * 1.001, "the text: the first repetition is no slower"
    return [
        f"The first call took about {round(first, -1):.0f} ms, some {round(first / events, -1):.0f} times the "
        f"kernel's {events:.3f} ms",
        f"read {unsync:.3f} ms, about a tenth of the kernel" if round(events / unsync) == 10 else "a tenth: re-measured",
        f"({synced:.3f} ms) reads {synced / events - 1:.0%} more than the CUDA events ({events:.3f} ms)",
        f"{(synced - events) * 1e3:.0f} microseconds of launch and wait",
        "the interquartile range is under 1% of the median" if all(
            (rep[k].quantile(0.75) - rep[k].quantile(0.25)) / rep[k].median() < 0.01 for k in ("event_ms", "host_ms"))
        else "IQR: re-measured",
        f"sits {gap.iloc[1:].min():.0f} to {gap.iloc[1:].max():.0f} microseconds above the events",
        f"{gap.iloc[0]:.0f} microseconds on the very first repetition",
        f"({rep['event_ms'].iloc[0]:.3f} ms against a median of {rep['event_ms'].median():.3f} ms)",
        f"{100 * c.fp32_gflops / sheet['fp32_gflops']:.0f}% of its {sheet['fp32_gflops'] / 1e3:.0f} TFLOP/s in FP32 and "
        f"{100 * c.fp64_gflops / sheet['fp64_gflops']:.0f}% of its {sheet['fp64_gflops'] / 1e3:.0f} TFLOP/s in FP64",
        f"{sheet['dram_gbs'] / 1e3:.1f} TB/s, at {100 * c.dram_gbs / sheet['dram_gbs']:.0f}%",
        f"some {c.l2_gbs / c.dram_gbs:.1f} times the copy's",
        f"({c.details['clock_khz'] / 1e3:,.0f} MHz on the reference GPU",
        f"FP32 reaches {100 * c.fp32_gflops / c.details['fp32_peak_at_clock_gflops']:.0f}% of the peak at that clock "
        f"and FP64 {100 * c.fp64_gflops / fp64_clock:.0f}%",
        f"stream at {_range(f'{stream.min():.1f}', f'{stream.max():.1f}')} TB/s",
        f"reads at {pts.loc['cupy.sum (reduction)', 'gbps'] / 1e3:.1f} TB/s",
        f"a matrix-vector product reads at {gm.loc[1, 'gbps'] / 1e3:.1f} TB/s",
        f"reaches {pts.loc['cupy.matmul 4096x4096 (FP32)', 'gflops'] / 1e3:.0f} TFLOP/s, "
        f"{100 * pts.loc['cupy.matmul 4096x4096 (FP32)', 'gflops'] / c.fp32_gflops:.0f}% of the FMA roof",
        f"{pts.loc['cupy.matmul 4096x4096 (FP64)', 'gflops'] / 1e3:.0f} TFLOP/s, "
        f"{pts.loc['cupy.matmul 4096x4096 (FP64)', 'gflops'] / c.fp64_gflops:.1f} times the FP64 FMA ceiling",
        "at about half of both roofs" if all(0.45 < v < 0.56 for v in (
            pts.loc["fma_per_element, 64 FMA/element", "gflops"] / c.fp32_gflops,
            pts.loc["fma_per_element, 64 FMA/element", "gbps"] / c.dram_gbs)) else "half of both roofs: re-measured",
        f"the time stays between {low['median_ms'].min():.2f} and {low['median_ms'].max():.2f} ms",
        f"streams {low['gbps'].min() / 1e3:.1f} to {low['gbps'].max() / 1e3:.1f} TB/s throughout",
        f"doubles, {sw.loc[512, 'median_ms']:.2f} to {sw.loc[1024, 'median_ms']:.2f} ms",
        "the time starts to grow at 24 FMAs per element" if sw.loc[24, "median_ms"] > 1.05 * low["median_ms"].max()
        else "grows at 24: re-measured",
        f"some {round(4 * c.balance(), -1):.0f} FMAs per element",
        f"the kernel takes {sw.loc[64, 'median_ms']:.2f} ms where the roofline promises {at64:.2f} ms",
        f"On the reference GPU, {100 * sw['gflops'].max() / c.fp32_gflops:.0f}% of it",
        f"stops at {100 * sw['gflops'].max() / c.fp32_gflops:.0f}% of the FMA roof",
        f"**DRAM bytes read**: {rd:.1f} MB", f"**DRAM bytes written**: {wr:.1f} MB, {rd - wr:.0f} MB *less*",
        f"the achieved intensity ({profiler.achieved_intensity(lh.load_reference('ch07_ncu_report').table):.1f})",
        f"**L1 hit rate** {ncu['l1tex__t_sector_hit_rate.pct']:.0f}%",
        f"**L2 hit rate** {ncu['lts__t_sector_hit_rate.pct']:.0f}%",
        f"{ncu['dram__throughput.avg.pct_of_peak_sustained_elapsed']:.0f}% of the peak, {rd + wr:.0f} MB in "
        f"{ncu['gpu__time_duration.sum'] / 1e3:.0f} microseconds. Lower than the {sw.loc[16, 'gbps'] / 1e3:.1f} TB/s",
        f"**Achieved occupancy** {ncu['sm__warps_active.avg.pct_of_peak_sustained_active']:.0f}%",
        f"{ncu['smsp__inst_executed.sum'] / 1e6:.1f} million warp instructions, of which "
        f"{ncu['smsp__sass_thread_inst_executed_op_ffma_pred_on.sum'] / 32 / 1e6:.1f} million",
        f"its {c.details['l2_bytes'] / 2**20:.0f} MiB L2",
        f"from {gm['gflops'].max() / 1e3:.0f} TFLOP/s at its best ({gm.loc[gm['gflops'].idxmax(), 'shape']}) to "
        f"{n2['gflops'] / 1e3:.1f} TFLOP/s at {n2['shape']}, {gm['gflops'].max() / n2['gflops']:.0f} times slower",
        f"between {squareish.min() / 1e3:.1f} and {squareish.max() / 1e3:.1f} TFLOP/s, "
        f"{100 * squareish.min() / c.fp32_gflops:.0f} to {100 * squareish.max() / c.fp32_gflops:.0f}% of the FP32 roof",
        f"at {gm.loc[1024, 'median_ms'] * 1e3:.0f} microseconds per product",
        f"stuck at {thin.min():.1f} to {thin.max():.1f} TB/s",
        f"to {gm.loc[1, 'gflops'] / 1e3:.1f} TFLOP/s: the library",
        f"(hand-written {100 * lib[0]:.0f}% and {100 * lib[1]:.0f}% of the library)",
        f"by {100 * (1 / lib[3] - 1):.0f}% at $4096^2$ and {100 * (1 / lib[2] - 1):.0f}% at $256^2$",
        f"(cuBLAS: {100 * (1 / lib[3] - 1):.0f}% ahead",
        f"fell to {n2['gflops'] / 1e3:.1f} TFLOP/s at {n2['shape']}",
        f"{roof2:,.0f} GFLOP/s at that intensity: {roof2 / n2['gflops']:.1f} times",
        f"({fft.loc[fft.index.min(), 'cupy_ms'] * 1e3:.1f} µs at $n = {fft.index.min()}$, `lh.benchmark`'s held clock) "
        f"is below NumPy's whole call ({fft.loc[fft.index.min(), 'numpy_ms'] * 1e3:.1f} µs) at every length measured",
        f"the GPU wins only from $n = {fft_points['with_copies']:,.0f}$ on",
    ]


def test_chapter7_prose_quotes_the_reference_data():
    """Re-measuring fails here instead of silently contradicting the text."""
    text = _markdown("book/07_profiling_roofline.ipynb")
    missing = [f for f in _chapter7_figures() if f not in text]
    assert not missing, "chapter 7's prose no longer matches its reference data; update these:\n" + "\n".join(missing)
    assert text.count("H200") == 1 and "H100, H200, A100" in text  # the datasheets known; no GPU named by hand


def test_lab7_prose_quotes_the_reference_data():
    text = _markdown("labs/07_profiling_roofline_lab.ipynb")
    c = roofline.reference_ceilings()
    sw = lh.load_reference("ch07_intensity_sweep").table.set_index("nfma")
    low = sw.loc[sw.index <= 16, "gbps"] / 1e3
    gm = lh.load_reference("ch07_skewed_gemm").table.set_index("n")
    pts = lh.load_reference("ch07_roofline_points").table.set_index("name")
    n = 2**26
    predicted = max(rk.fma_per_element_bytes(n, 4) / c.dram_gbs, rk.fma_per_element_flops(n, 64) / c.fp32_gflops) / 1e6
    ratio64 = sw.loc[64, "median_ms"] / predicted
    assert 1.8 < ratio64 < 2.0  # "almost 2 at 64 FMAs per element"
    figures = [f"ridge of the reference GPU ({c.balance():.1f} FLOP/byte",
               f"at {gm.loc[1, 'gbps'] / 1e3:.1f} TB/s on the reference GPU",
               "almost 2 at 64 FMAs", f"at {low.min():.1f} to {low.max():.1f} TB/s",
               "time starts to grow at 24 FMAs per element",
               f"reached {pts.loc['cupy.sum (reduction)', 'gbps'] / 1e3:.1f} TB/s"]
    missing = [f for f in figures if f not in text]
    assert not missing, missing
    assert "H200" not in text


# --- the host copy ceiling (the CPU's memory ceiling: runs on the CPU on both backends) -----------------------


@pytest.mark.parametrize("n", [1, 7, 1000, 4099])
def test_host_copy_copies_every_element(n):
    x = np.random.default_rng(n).standard_normal(n)
    out = np.zeros_like(x)
    rk.host_copy(x, out)
    assert np.array_equal(out, x)


@pytest.mark.parametrize("kind", roofline.HOST_COPY_VARIANTS)
def test_time_host_copy_times_a_checked_copy(kind):
    src = np.arange(1 << 16, dtype=np.float64)
    out = np.zeros_like(src)
    t = roofline.time_host_copy(src, out, kind=kind, warmup=1, repeat=2)
    assert np.array_equal(out, src)
    assert t.nbytes == 2 * src.nbytes and t.clock == "host-clock" and t.gbps > 0


def test_the_host_in_place_add_reads_two_arrays_and_writes_one():
    src = np.arange(1001, dtype=np.float64)  # not a multiple of the thread count
    out = np.zeros_like(src)
    t = roofline.time_host_copy(src, out, kind="add_threads", warmup=1, repeat=2)
    assert np.array_equal(out, 3 * src)  # y += x, once per call: one warm-up and two timed calls
    assert t.nbytes == 3 * src.nbytes and "read 2, write 1" in t.label


def test_time_host_copy_refuses_bad_input():
    src = np.zeros(8)
    with pytest.raises(lh.ArgumentError, match="kind"):
        roofline.time_host_copy(src, kind="memcpy")
    with pytest.raises(lh.ArgumentError, match="out"):
        roofline.time_host_copy(src, np.zeros(9))
    with pytest.raises(lh.ArgumentError, match="nbytes"):
        roofline.measure_host_bandwidth(0)


def test_measure_host_bandwidth_reports_the_best_copy_and_the_threads():
    m = roofline.measure_host_bandwidth(1 << 20, repeat=2)
    assert m.unit == "GB/s" and m.value == max(r["gbps"] for r in m.tried) > 0
    assert [r["kernel"] for r in m.tried] == list(rm.HOST_STREAM_VARIANTS)
    threads = {r["kernel"]: r["threads"] for r in m.tried}
    n = host.host_cpu().numba_threads
    assert threads == {"numba_parallel": n, "numpy": 1, "numpy_threads": n, "add_threads": n}
    with pytest.raises(lh.ArgumentError, match="variants"):
        roofline.measure_host_bandwidth(1 << 10, ("memcpy",))


def test_the_saved_sanitizer_report_points_at_the_lines_it_names():
    """Chapter 7 prints compute-sanitizer's report saved on a GPU (ch07_sanitizer): each ``roofline.py:N`` in it
    must still be the access it reports, in the kernel it names, or the chapter quotes a line that moved."""
    import re

    ref = lh.load_reference("ch07_sanitizer")
    source = Path(rk.__file__).read_text().splitlines()
    named = 0
    for kernel, line in zip(ref.table["kernel"], ref.table["line"]):
        for number in re.findall(r"roofline\.py:(\d+)", str(line)):
            text = source[int(number) - 1].strip()
            start = next(i for i, s in enumerate(source) if s.startswith(f"def {kernel}("))
            end = next((i for i in range(start + 1, len(source)) if source[i].startswith("def ")), len(source))
            assert start < int(number) - 1 < end and ("x[i]" in text or "out[i]" in text), (
                f"ch07_sanitizer names roofline.py:{number} in {kernel}, now {text!r}: keep the kernels' lines")
            named += 1
    assert named >= 5
