"""Benchmark and reference data of chapter 7, "Profiling and the roofline" (GPU only).

collect(out_dir) saves the tables the chapter plots:
    ch07_timing_hygiene     one launch timed four ways (first call, unsynchronised, synchronised, events)
    ch07_timing_repeats     50 repetitions, CUDA events and a synchronised host clock (noise)
    ch07_stopwatch          a copy kernel, 2^16..2^28 floats, with four clocks: host clock, events around a Python
                            launch, events with the stream held, Nsight Compute's duration (its rows marked
                            unavailable, with the reason, when ncu cannot read the counters)
    ch07_ceilings           the measured ceilings (DRAM and L2 bandwidth, FP32 and FP64 FMA peaks); DRAM: the
                            fastest stream, copies and a read-2-write-1 triad (roofline.measure_stream_bandwidth)
    ch07_copy_variants      every copy tried for the copy ceiling (4-, 8-, 16-byte accesses, grids, CuPy's)
    ch07_intensity_sweep    fma_per_element over FMA counts 1..1024 (the kernel walking along the roof)
    ch07_roofline_points    representative kernels (SAXPY, FMA-heavy kernels, cupy.sum, cupy.matmul)
    ch07_skewed_gemm        cupy.matmul on m x k by k x n shapes, m * n and k fixed
    ch07_ncu_report         Nsight Compute's key metrics for one fma_per_element launch (skipped, with the
                            reason printed, when ncu cannot read the counters)
    ch07_fft_crossover      numpy.fft (CPU) against cupy.fft (GPU, with and without the copies), 16 to 4M points
    ch07_sanitizer          compute-sanitizer's output: memcheck on a kernel without a bounds check (and its
                            fix), racecheck on a shared-memory kernel without its barrier (and its fix); skipped,
                            with the reason printed, when compute-sanitizer is missing
bench(ctx) returns the rows with targets: the fastest Numba copy against CuPy's device-to-device copy, both timed
in the same measurement of the copy ceiling (target 95%), and the measured FP32 FMA peak against the FP32 peak at
the GPU's reported clock (target 90%); then one row per copy tried, against the copy ceiling (the fastest of them),
and one per triad tried, against the DRAM ceiling (the fastest stream of all).

Run: python bench/run_all.py --only roofline --collect src/labhelpers/data/reference
To refresh only some tables, name them (without the ch07_ prefix) in ROOFLINE_COLLECT, e.g.
ROOFLINE_COLLECT=ceilings,copy_variants (the other reference files are then left as they are), or
ROOFLINE_COLLECT=fft_crossover,sanitizer for the two tables added last.
"""

from __future__ import annotations

import os

from common import COPY_CEILING, Context, Row, lh  # noqa: F401  (common puts src/ on the path, selects the GPU)
from labhelpers import profiler, roofline
from labhelpers.experiments import roofline as experiments
from labhelpers.experiments import roofline_stopwatch as stopwatch
from labhelpers.kernels import roofline as rk
from labhelpers.refdata import current_meta, save_reference

TOPIC = "roofline"
#: Ceilings measured by collect(), reused by bench() in the same run (no second measurement).
_measured: dict = {}


def _ceilings() -> roofline.Ceilings:
    if "ceilings" not in _measured:
        _measured["ceilings"] = roofline.measure_ceilings(cache=False, progress=False)
    return _measured["ceilings"]


#: The tables collect() writes, in order (names without the "ch07_" prefix).
TABLES = ("timing_hygiene", "timing_repeats", "stopwatch", "ceilings", "copy_variants", "intensity_sweep",
          "roofline_points", "skewed_gemm", "ncu_report", "fft_crossover", "sanitizer")


def _wanted() -> set[str]:
    """The tables to collect: $ROOFLINE_COLLECT (comma-separated, without "ch07_"), or all of them."""
    names = {n.strip().removeprefix("ch07_") for n in os.environ.get("ROOFLINE_COLLECT", "").split(",") if n.strip()}
    unknown = names - set(TABLES)
    if unknown:
        raise ValueError(f"ROOFLINE_COLLECT names unknown tables {sorted(unknown)}: choose from {', '.join(TABLES)}")
    return names or set(TABLES)


def _cpu_name() -> str:
    """The host CPU's model name (numpy.fft's side of the FFT comparison)."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    import platform

    return platform.processor() or platform.machine()


def collect(out_dir) -> None:
    """Measure and save the reference tables of chapter 7 into ``out_dir`` (all, or those in $ROOFLINE_COLLECT)."""
    info = lh.device_info()
    meta = {**current_meta(), "clock_khz": info.clock_khz, "l2_bytes": info.l2_bytes}
    wanted = _wanted()

    if "timing_hygiene" in wanted:
        save_reference("ch07_timing_hygiene", experiments.timing_hygiene(), out_dir, meta=meta,
                       notes="fma_per_element, 2^26 float32, 256 FMA/element; first call compiles a fresh dispatcher")
    if "timing_repeats" in wanted:
        save_reference("ch07_timing_repeats", experiments.timing_repeats(), out_dir, meta=meta,
                       notes="same launch 50 times: CUDA events (stream held) vs host clock around "
                             "launch/synchronize")
    if "stopwatch" in wanted:
        save_reference("ch07_stopwatch", stopwatch.stopwatch_sweep(), out_dir, meta=meta,
                       notes="labhelpers.kernels.roofline_stopwatch.copy, float32, 1 element/thread, 256 threads; median "
                             "of 20 per clock; Nsight Compute: gpu__time_duration.sum, --clock-control none, "
                             "median of 3 launches")

    if "ceilings" in wanted:
        ceilings = _ceilings()
        datasheet = roofline.datasheet_ceilings(info.name)
        table = ceilings.as_table()
        table["datasheet"] = [datasheet.value(k) if datasheet else None for k in table["ceiling"]]
        save_reference("ch07_ceilings", table, out_dir,
                       meta={**meta, "datasheet": datasheet.label if datasheet else None,
                             "fp32_peak_at_clock_gflops": roofline.fp32_peak_at_clock(info)},
                       notes="best of the configurations tried; dram_gbs = the fastest stream (copies and a "
                             "read-2-write-1 triad, saxpy_vec4), bytes = read + written; L2: bytes read")
    if "copy_variants" in wanted:
        save_reference("ch07_copy_variants", roofline.copy_variants_table(_ceilings()), out_dir, meta=meta,
                       notes="labhelpers.roofline.measure_dram_bandwidth: 1 GiB copied, bytes = read + written, "
                             "median of 10 x 5 copies each; the fastest copy is the copy (DRAM) ceiling")

    if "intensity_sweep" in wanted:
        save_reference("ch07_intensity_sweep", experiments.intensity_sweep(progress=False), out_dir, meta=meta,
                       notes="fma_per_element, 2^26 float32, grid filling every SM, median of 10 x 3 launches")
    if "roofline_points" in wanted:
        # checked against the ceilings of this run: an impossible point raises instead of becoming reference data
        points = experiments.representative_points(ceilings=_ceilings())
        save_reference("ch07_roofline_points", points, out_dir, meta=meta,
                       notes="intensity = flops / the bytes the kernel must move (algorithmic); every result "
                             "checked, every rate checked against the ceilings of the same run")
    if "skewed_gemm" in wanted:
        save_reference("ch07_skewed_gemm", experiments.skewed_gemm_sweep(progress=False), out_dir, meta=meta,
                       notes="cupy.matmul float32 (no TF32), m*n = 1024^2, k = 1024, as in the lecture's SGEMM "
                             "study")
    if "ncu_report" in wanted:
        try:
            report = profiler.profile_fma_per_element()
            save_reference("ch07_ncu_report", report, out_dir,
                           meta={**meta, "kernel": "fma_per_element, 2^24 float32, 16 FMA/element",
                                 "algorithmic_intensity": rk.fma_per_element_intensity(16, 4),
                                 "achieved_intensity": profiler.achieved_intensity(report)})
        except profiler.ProfilerUnavailable as exc:
            print(f"-- roofline: ch07_ncu_report not collected: {exc}")
    if "fft_crossover" in wanted:
        save_reference("ch07_fft_crossover", experiments.fft_crossover(), out_dir,
                       meta={**meta, "cpu": _cpu_name(), "cpu_count": os.cpu_count()},
                       notes="complex64, one vector per call; numpy.fft (pocketfft, one core, host clock, median); "
                             "cupy.fft on data already on the GPU (CUDA events, plan cached); cupy.fft with the copy "
                             "in and out (host clock, pageable host memory)")
    if "sanitizer" in wanted:
        try:  # the sanitizer is a separate tool: if it is missing or fails, keep the other tables and the bench
            table = experiments.sanitizer_table()
            unguarded = table.loc[table["kernel"] == "scale_unguarded", "line"]
            if not unguarded.str.contains("Invalid __global__").any():  # e.g. cut by the print limit
                raise profiler.ProfilerUnavailable("memcheck did not report scale_unguarded's out-of-bounds write: "
                                                   + " | ".join(unguarded.head(4)))
            save_reference("ch07_sanitizer", table, out_dir, meta=meta,
                           notes=f"compute-sanitizer {' '.join(profiler.SANITIZER_OPTIONS)}; memcheck on "
                                 "scale_unguarded "
                                 "(1000 elements, 4 blocks of 256 threads) and scale; racecheck --racecheck-report "
                                 "analysis on reverse_in_block(_no_barrier) (2 blocks of 64); lineinfo=True")
        except profiler.ProfilerUnavailable as exc:
            print(f"-- roofline: ch07_sanitizer not collected: {exc}")


def bench(ctx: Context) -> list[Row]:
    """The memory and FP32 ceilings against their yardsticks, measured in this run."""
    info = lh.device_info()
    c = _ceilings()
    copies = roofline.copy_variants_table(c)
    ours = copies[copies["grid"] != roofline.LIBRARY]
    library = copies.loc[copies["grid"] == roofline.LIBRARY, "gbps"]
    best = ours.iloc[0]  # fastest first
    peak = roofline.fp32_peak_at_clock(info) or float("nan")
    sheet = roofline.datasheet_ceilings(info.name)
    clock_mhz = (info.clock_khz or 0) / 1e3
    sheet_txt = f"; datasheet (boost) {sheet.fp32_gflops:,.0f}" if sheet and sheet.fp32_gflops else ""
    rows = [
        Row(TOPIC, f"best Numba copy ({best['kernel']}, {int(best['access_bytes'])} B)", "1 GiB copy", best["gbps"],
            "GB/s", "CuPy D2D copy, same measurement", library.iloc[0] if len(library) else float("nan"), 0.95),
        Row(TOPIC, "fma_chains FP32 (FMA ceiling)", f"{clock_mhz:,.0f} MHz", c.fp32_gflops, "GFLOP/s",
            f"{info.sm_count} SMs x 128 x 2 x {clock_mhz:,.0f} MHz{sheet_txt}", peak, 0.90),
        Row(TOPIC, "l2_read (L2 ceiling)", "", c.l2_gbs, "GB/s", "DRAM ceiling, same run", c.dram_gbs),
    ]
    p64 = roofline.fp64_peak_at_clock(info)
    if c.fp64_gflops and p64:
        rows.append(Row(TOPIC, "fma_chains FP64", f"{clock_mhz:,.0f} MHz", c.fp64_gflops, "GFLOP/s",
                        "FP64 peak at this clock", p64))
    for _, v in copies.iterrows():  # every copy tried for the copy ceiling
        name = (f"  {v['kernel']} {int(v['access_bytes'])} B, {int(v['threads'])} thr"
                if v["grid"] != roofline.LIBRARY else "  CuPy copy")
        size = {"one wave": "wave", roofline.LIBRARY: "library"}.get(v["grid"], "1 elem/thread")
        rows.append(Row(TOPIC, name, size, v["gbps"], "GB/s", COPY_CEILING, c.copy_gbs()))
    for v in c.details.get("tried", {}).get("dram_triads", []):  # the triads: the DRAM ceiling is the best stream
        rows.append(Row(TOPIC, f"  {v['kernel']}, {v['threads']} thr", "1 group/thread", v["gbps"], "GB/s",
                        "DRAM ceiling (best stream), same run", c.dram_gbs))
    return rows


if __name__ == "__main__":
    import sys

    from common import report

    if len(sys.argv) > 1:
        collect(sys.argv[1])
    print(report(bench(Context())))
