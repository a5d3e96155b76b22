"""Chapter "Parallel reduction": timing the variants, and the tables the chapter reads off its reference data.

Measuring: :func:`time_variant` checks and times one variant of :mod:`labhelpers.kernels.reduction`,
:func:`sweep_variants` every variant at every block size (``bench/reduction.py`` stores the result as
reference ``ch06_reduction_sweep``).

The chapter's two tables, measured on a GPU (CuPy needed for the inputs and ``cupy.sum``):
:func:`reduction_sweep` (every variant at every block size, with ``cupy.sum``: reference
``ch06_reduction_sweep``) and :func:`loads_in_flight` (the best kernel against the loads each thread
keeps in flight: reference ``ch06_loads_in_flight``). ``bench/reduction.py`` stores both.

Reading a sweep table (measured here or loaded with :func:`labhelpers.load_reference`):
:func:`best_gbps` (one variant's best bandwidth), :func:`ceilings` (the yardsticks: the copy ceiling
of the same GPU, which :func:`labhelpers.roofline.measure_dram_bandwidth` defines and chapter 7
measures, and ``cupy.sum`` of the sweep), :func:`gbps_grid` (variant x block size),
:func:`best_per_variant`, :func:`variant_summary` (the chapter's table beside the lecture's),
:func:`max_rel_errors`; of the loads-in-flight table: :func:`best_in_flight`, :func:`verdict`; of
both: :func:`launch_delay_us` (what the number of calls per timing does to a fast kernel).
The chapter's figures of these tables are in :mod:`labhelpers.figures.reduction`.
"""

from __future__ import annotations

import math
from typing import Sequence

import pandas as pd
from numba import cuda

from .. import backend
from ..kernels.reduction import BLOCK_SIZES, CLASSIC, VARIANTS, Reducer
from ..sweep import sweep
from ..timing import benchmark
from ..xp import xp

#: How tables and plots name the two yardsticks of a reduction: the copy ceiling of the GPU
#: (:func:`labhelpers.roofline.measure_dram_bandwidth`, bytes read + written) and ``cupy.sum``.
COPY_CEILING = "copy ceiling (read + write)"
CUB = "cupy.sum (CUB)"
CEILINGS = (COPY_CEILING, CUB)
#: The sweep's variant key of ``cupy.sum`` (a row of the sweep table, measured in the same run).
CUB_KEY = "cupy_sum"
#: Values summed by the chapter's measurements (256 MiB of float32, several times any L2 cache).
SWEEP_N = 2**26
#: Calls per timing (``number`` of :func:`labhelpers.benchmark`) in :func:`reduction_sweep` (66
#: configurations) and in :func:`loads_in_flight` and ``cupy.sum``: see :func:`launch_delay_us`.
SWEEP_NUMBER = 3
FLIGHT_NUMBER = 10
#: The configurations :func:`loads_in_flight` tries: block sizes, and loads in flight per thread.
FLIGHT_THREADS = (256, 1024)
FLIGHT_UNROLL = (1, 2, 4, 8, 16)
#: How ``labhelpers.roofline.format_table`` prints :func:`variant_summary` and :func:`verdict` for reading.
def _gbps_text(v: float) -> str:
    """GB/s for reading: thousands separated, one decimal below 10 (one atomic per element: 2.3)."""
    return f"{v:,.0f}" if abs(v) >= 10 else f"{v:.1f}"


SUMMARY_FORMATS = {"lecture: best GB/s": "{:,.2f}", "here: best GB/s": _gbps_text, "lecture: x variant 1": "{:.2f}",
                   "here: x variant 1": "{:.2f}", "here: % of copy": "{:.0f}%"}
VERDICT_FORMATS = {"GB/s": _gbps_text, "best kernel as % of it": "{:.1f}%"}
#: The chapter's default configuration of the best kernel (block size, loads in flight per thread).
BEST_THREADS, BEST_UNROLL = 256, 8


# ---------------------------------------------------------------------------------------------
# Measuring
# ---------------------------------------------------------------------------------------------


def time_variant(x_d, key: str, threads: int, *, repeat: int = 20, number: int = 5, warmup: int = 2,
                 blocks: int | None = None, unroll: int = 8):
    """Check and time one variant on device array ``x_d``; return ``(Timing, sum)``.

    The sum comes from one untimed call (which also compiles the kernel). The timed
    callable is :meth:`Reducer.launch`: every pass, and the zeroing of the accumulator for
    the atomic variants, but no allocation and no copy to the host. ``nbytes`` is the bytes
    read (``4 n``), so ``Timing.gbps`` is the effective bandwidth. CUDA events
    (:func:`labhelpers.benchmark`); ``number`` launches between two events hide the time
    Python needs to launch them.
    """
    reducer = Reducer(x_d, key, threads, blocks, unroll)
    value = reducer()
    timing = benchmark(reducer.launch, nbytes=reducer.nbytes, repeat=repeat, number=number, warmup=warmup,
                       label=f"{key} ({threads} threads)")
    return timing, value


def sweep_variants(x_d, keys: Sequence[str] = CLASSIC, threads: Sequence[int] = BLOCK_SIZES, *,
                   reference: float | None = None, repeat: int = 10, number: int = 3, progress: bool = True):
    """Effective bandwidth of every variant in ``keys`` at every block size in ``threads``.

    Returns the :func:`labhelpers.sweep` table (columns ``variant``, ``threads``,
    ``median_ms``, ``gbps``, ``status``...) plus ``number`` (1-7 or NaN), ``title``,
    ``result`` (the sum the kernel returned) and, given the exact ``reference`` sum,
    ``rel_error``. GPU-only variants under the simulator are recorded as invalid.
    """
    results: dict[tuple[str, int], float] = {}

    def check(variant: str, threads: int) -> str | None:
        v = VARIANTS[variant]
        if v.gpu_only and backend.is_simulator():
            return f"GPU only: needs {v.needs}"
        return None

    def run(variant: str, threads: int):
        timing, value = time_variant(x_d, variant, threads, repeat=repeat, number=number)
        results[(variant, threads)] = float(value)
        return timing

    table = sweep(run, {"variant": list(keys), "threads": list(threads)}, check=check, progress=progress,
                  desc="reduction sweep")
    table.insert(1, "number", [VARIANTS[k].number if VARIANTS[k].number else math.nan for k in table["variant"]])
    table.insert(2, "title", [VARIANTS[k].title for k in table["variant"]])
    table["result"] = [results.get((v, t), math.nan) for v, t in zip(table["variant"], table["threads"])]
    if reference is not None:
        table["rel_error"] = (table["result"] - reference).abs() / abs(reference)
    return table


def gpu_inputs(n: int = SWEEP_N, seed: int = 0):
    """Uniform [0, 1) float32 on the GPU: ``(CuPy array, its Numba view, the exact float64 sum)``. GPU only."""
    backend.require_gpu("gpu_inputs", needs_cupy=True,
                        instead="The chapter shows the reference GPU's tables instead (on a GPU, CuPy's random "
                                "numbers are the input and cupy.sum is the yardstick).")
    cp = xp  # CuPy: require_gpu(needs_cupy=True) passed

    x_cp = cp.random.default_rng(seed).random(n, dtype=cp.float32)
    exact = float(cp.sum(x_cp, dtype=cp.float64))
    return x_cp, cuda.as_cuda_array(x_cp), exact


def time_cupy_sum(x_cp, repeat: int = 20, number: int = FLIGHT_NUMBER):
    """``cupy.sum`` (NVIDIA's CUB) of ``x_cp``, timed with CUDA events; ``nbytes`` = bytes read."""
    import cupy as cp  # optional: the GPU extra

    return benchmark(lambda: cp.sum(x_cp), nbytes=x_cp.nbytes, repeat=repeat, number=number, label="cupy.sum")


def check_sum(value: float, exact: float, what: str, rtol: float = 1e-3) -> None:
    if not abs(float(value) - exact) <= rtol * abs(exact):
        raise AssertionError(f"{what} returned {float(value)!r}, the float64 sum is {exact!r}: wrong result")


def reduction_sweep(n: int = SWEEP_N, keys: Sequence[str] | None = None,
                    threads: Sequence[int] = BLOCK_SIZES) -> pd.DataFrame:
    """Every variant at every block size on ``n`` float32, then ``cupy.sum``, all on the same data. GPU only.

    The table of reference ``ch06_reduction_sweep``: :func:`sweep_variants`' columns, with ``n`` first, each
    kernel's relative error against the float64 sum (checked below 1e-3, except for one atomic per element,
    whose float32 total stalls at 2**24: a lesson of the chapter, not a bug), and one row ``cupy_sum``
    (:func:`time_cupy_sum`). One atomic per element is slow (every addition serialised), so it is timed
    with fewer repetitions and one call per timing.
    """
    x_cp, x_nb, exact = gpu_inputs(n)
    keys = list(VARIANTS) if keys is None else list(keys)
    fast = [k for k in keys if k != "atomic_per_element"]
    parts = [sweep_variants(x_nb, fast, threads, reference=exact, repeat=10, number=SWEEP_NUMBER, progress=False)]
    if "atomic_per_element" in keys:
        parts.append(sweep_variants(x_nb, ["atomic_per_element"], threads, reference=exact, repeat=3, number=1,
                                    progress=False))
    import cupy as cp  # optional: the GPU extra

    timing = time_cupy_sum(x_cp)
    result = float(cp.sum(x_cp))
    row = {"variant": CUB_KEY, "number": math.nan, "title": CUB, "threads": math.nan, **timing.as_row(),
           "status": "ok", "reason": "", "result": result, "rel_error": abs(result - exact) / abs(exact)}
    table = pd.concat([*parts, pd.DataFrame([row])], ignore_index=True)
    table.insert(0, "n", n)
    checked = (table["status"] == "ok") & (table["variant"] != "atomic_per_element")
    bad = table[checked & (table["rel_error"] > 1e-3)]
    if len(bad):
        raise AssertionError(f"wrong sums in the sweep:\n{bad[['variant', 'threads', 'result', 'rel_error']]}")
    return table


def loads_in_flight(n: int = SWEEP_N, threads: Sequence[int] = FLIGHT_THREADS,
                    unrolls: Sequence[int] = FLIGHT_UNROLL) -> pd.DataFrame:
    """The best kernel's GB/s against the loads each thread keeps in flight (``unroll``), per block size. GPU only.

    The table of reference ``ch06_loads_in_flight``: ``n``, ``threads``, ``unroll``, ``blocks`` (the resident
    grid it got), ``resident_threads``, ``bytes_in_flight`` (blocks x threads x unroll x 4 bytes) and the
    timing columns (:data:`FLIGHT_NUMBER` calls per timing). Every sum is checked first.
    """
    _x_cp, x_nb, exact = gpu_inputs(n)
    rows = []
    for t in threads:
        for unroll in unrolls:
            timing, value = time_variant(x_nb, "best", t, unroll=unroll, repeat=20, number=FLIGHT_NUMBER)
            check_sum(value, exact, f"best kernel ({t} threads, unroll {unroll})")
            blocks = Reducer(x_nb, "best", t, unroll=unroll).launches[0][0]
            row = {"n": n, "threads": t, "unroll": unroll, "blocks": blocks, "resident_threads": blocks * t,
                   "bytes_in_flight": blocks * t * unroll * 4}
            row.update(timing.as_row())
            rows.append(row)
    return pd.DataFrame(rows)


# ---------------------------------------------------------------------------------------------
# Reading the tables
# ---------------------------------------------------------------------------------------------


def best_gbps(table: pd.DataFrame, variant: str, threads: float | None = None) -> float:
    """The highest GB/s of ``variant`` in a sweep table (at ``threads`` per block if given); NaN if not measured."""
    rows = table[table["variant"] == variant]
    if threads is not None:
        rows = rows[rows["threads"] == threads]
    return float(rows["gbps"].max()) if rows["gbps"].notna().any() else math.nan


def ceilings(table: pd.DataFrame, copy_gbs: float, *, copy_source: str = "",
             sum_source: str = "") -> dict[str, float]:
    """The two yardsticks of a reduction: name -> GB/s (NaN where not measured).

    Args:
        table: a sweep table (:func:`reduction_sweep`): its ``cupy_sum`` row is the library's sum.
        copy_gbs: the copy ceiling of the same GPU: :func:`labhelpers.roofline.measure_dram_bandwidth`,
            as ``labhelpers.roofline.ceilings_or_reference().copy_gbs()`` gives it (this GPU's, or the
            reference GPU's from reference ``ch07_copy_variants``). One definition, one value, every chapter.
            Not ``.dram_gbs``: that is the device-memory ceiling, the fastest stream, a triad included.
        copy_source, sum_source: where each comes from (e.g. a ``Measured.label``), added to the names
            for a plot's legend: ``"copy ceiling (read + write), reference: NVIDIA H200 (2026-11-22)"``.
    """
    def name(base: str, source: str) -> str:
        return f"{base}, {source}" if source else base

    return {name(COPY_CEILING, copy_source): float(copy_gbs), name(CUB, sum_source): best_gbps(table, CUB_KEY)}


def gbps_grid(table: pd.DataFrame, keys: Sequence[str] | None = None,
              block_sizes: Sequence[int] = BLOCK_SIZES) -> pd.DataFrame:
    """Variant x block size table of GB/s, rows in the order of ``keys`` (default: every variant); NaN: not measured."""
    keys = list(VARIANTS) if keys is None else list(keys)
    rows = table[table["variant"].isin(keys)]
    grid = rows.pivot_table(index="variant", columns="threads", values="gbps", dropna=False)
    return grid.reindex(index=keys, columns=list(block_sizes))


def best_per_variant(table: pd.DataFrame, keys: Sequence[str] | None = None) -> pd.DataFrame:
    """Each variant's best block size (``threads``) and its ``gbps``, indexed by variant; NaN where not measured."""
    keys = list(VARIANTS) if keys is None else list(keys)
    rows = table[table["variant"].isin(keys)].dropna(subset=["gbps"])
    best = rows.loc[rows.groupby("variant")["gbps"].idxmax(), ["variant", "threads", "gbps"]].set_index("variant")
    return best.reindex(keys)


def variant_summary(table: pd.DataFrame, lecture: pd.DataFrame, copy_gbs: float,
                    keys: Sequence[str] | None = None) -> pd.DataFrame:
    """The chapter's table: each variant's best GB/s and block size, and its speedup over variant 1, in the
    lecture's table (``lecture``) and in a sweep (``table``), with the sweep's share of the copy ceiling
    ``copy_gbs`` of the same GPU (see :func:`ceilings`).

    Rows are labelled as on the plots (``"3. sequential addressing"``); NaN where a variant was not measured.
    """
    keys = list(VARIANTS) if keys is None else list(keys)
    ours, theirs = best_per_variant(table, keys), best_per_variant(lecture, keys)
    summary = pd.DataFrame({
        "lecture: best GB/s": theirs["gbps"], "lecture: at threads": theirs["threads"],
        "lecture: x variant 1": theirs["gbps"] / theirs.loc["interleaved_divergent", "gbps"],
        "here: best GB/s": ours["gbps"], "here: at threads": ours["threads"],
        "here: x variant 1": ours["gbps"] / ours.loc["interleaved_divergent", "gbps"],
        "here: % of copy": 100 * ours["gbps"] / copy_gbs,
    })
    summary.index = [VARIANTS[k].label for k in summary.index]
    return summary


def max_rel_errors(table: pd.DataFrame, keys: Sequence[str]) -> pd.Series:
    """The largest relative error against the float64 sum that each variant in ``keys`` recorded in a sweep."""
    return table.dropna(subset=["rel_error"]).groupby("variant")["rel_error"].max().reindex(list(keys))


def best_in_flight(flight: pd.DataFrame) -> pd.Series | None:
    """The fastest row of a loads-in-flight table (``ch06_loads_in_flight``), or None if nothing was measured."""
    measured = flight.dropna(subset=["gbps"])
    return measured.loc[measured["gbps"].idxmax()] if len(measured) else None


def launch_delay_us(sweep_table: pd.DataFrame, flight_table: pd.DataFrame, threads: int = BEST_THREADS,
                    unroll: int = BEST_UNROLL) -> dict[str, float]:
    """What timing ``number`` calls between two CUDA events does to a fast kernel, read off the two tables.

    The sweep timed the best kernel (``threads`` per block, ``unroll`` loads in flight) with
    :data:`SWEEP_NUMBER` calls per timing, the loads-in-flight table with :data:`FLIGHT_NUMBER`. The start
    event is recorded while Python still issues the first call, so each timing contains one *host launch
    delay* ``d`` (the time from recording the event to the GPU starting the first kernel: Python, Numba's
    dispatch and argument packing, the driver's launch) spread over its ``number`` calls. With ``t`` the
    kernel's own time: ``t3 = t + d / 3`` and ``t10 = t + d / 10``, so ``d = (t3 - t10) / (1/3 - 1/10)``.

    Returns:
        ``sweep_us`` and ``flight_us`` (time per call in each table), ``sweep_gbps`` and ``flight_gbps``,
        ``delay_us`` (``d``) and ``kernel_us`` (``t``); NaN where the tables lack the row.
    """
    rows = sweep_table[(sweep_table["variant"] == "best") & (sweep_table["threads"] == threads)]
    fl = flight_table[(flight_table["threads"] == threads) & (flight_table["unroll"] == unroll)]
    if not len(rows) or not len(fl) or rows["median_ms"].isna().all() or fl["median_ms"].isna().all():
        nan = math.nan
        return {"sweep_us": nan, "flight_us": nan, "sweep_gbps": nan, "flight_gbps": nan, "delay_us": nan,
                "kernel_us": nan}
    t_few, t_many = 1e3 * float(rows["median_ms"].iloc[0]), 1e3 * float(fl["median_ms"].iloc[0])
    delay = (t_few - t_many) / (1 / SWEEP_NUMBER - 1 / FLIGHT_NUMBER)
    return {"sweep_us": t_few, "flight_us": t_many, "sweep_gbps": float(rows["gbps"].iloc[0]),
            "flight_gbps": float(fl["gbps"].iloc[0]), "delay_us": delay, "kernel_us": t_many - delay / FLIGHT_NUMBER}


def verdict(best_gbs: float, yardsticks: dict[str, float]) -> pd.DataFrame:
    """The best kernel's GB/s beside each yardstick (name -> GB/s), and the kernel as a percentage of each."""
    gbs = {"best kernel": best_gbs, **yardsticks}
    share = {"best kernel": 100.0, **{name: 100 * best_gbs / value for name, value in yardsticks.items()}}
    return pd.DataFrame({"GB/s": gbs, "best kernel as % of it": share}).round({"best kernel as % of it": 1})
