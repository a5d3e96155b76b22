"""Chapter "Parallel reduction": timing the variants, and the tables the chapter reads off its reference data.

Measuring: :func:`time_variant` checks and times one variant of :mod:`labhelpers.kernels.reduction`,
:func:`sweep_variants` every variant at every block size (``bench/reduction.py`` stores the result as
reference ``ch06_reduction_sweep``).

Reading a sweep table (measured here or loaded with :func:`labhelpers.load_reference`):
:func:`best_gbps` (one variant's best bandwidth), :func:`ceilings` (the copy and ``cupy.sum``
yardsticks measured in the same run), :func:`gbps_grid` (variant x block size),
:func:`best_per_variant`, :func:`variant_summary` (the chapter's table beside the lecture's),
:func:`max_rel_errors`; and of the loads-in-flight table: :func:`best_in_flight`, :func:`verdict`.
The chapter's figures of these tables are in :mod:`labhelpers.figures.reduction`.
"""

from __future__ import annotations

import math
from typing import Sequence

import pandas as pd

from .. import backend
from ..kernels.reduction import BLOCK_SIZES, CLASSIC, VARIANTS, Reducer
from ..sweep import sweep
from ..timing import benchmark

#: The yardsticks a sweep table carries besides the kernels: variant key -> name on plots and tables.
CEILINGS = {"copy": "copy ceiling (read + write)", "cupy_sum": "cupy.sum (CUB)"}


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


# ---------------------------------------------------------------------------------------------
# Reading the tables
# ---------------------------------------------------------------------------------------------


def best_gbps(table: pd.DataFrame, variant: str, threads: float | None = None) -> float:
    """The highest GB/s of ``variant`` in a sweep table (at ``threads`` per block if given); NaN if not measured."""
    rows = table[table["variant"] == variant]
    if threads is not None:
        rows = rows[rows["threads"] == threads]
    return float(rows["gbps"].max()) if rows["gbps"].notna().any() else math.nan


def ceilings(table: pd.DataFrame) -> dict[str, float]:
    """The yardsticks of :data:`CEILINGS` measured in the same run as a sweep table: name -> GB/s (NaN if absent)."""
    return {name: best_gbps(table, key) for key, name in CEILINGS.items()}


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


def variant_summary(table: pd.DataFrame, lecture: pd.DataFrame, keys: Sequence[str] | None = None) -> pd.DataFrame:
    """The chapter's table: each variant's best GB/s and block size, and its speedup over variant 1, in the
    lecture's table (``lecture``) and in a sweep (``table``), with the sweep's share of the copy ceiling.

    Rows are labelled as on the plots (``"3. sequential addressing"``); NaN where a variant was not measured.
    """
    keys = list(VARIANTS) if keys is None else list(keys)
    ours, theirs = best_per_variant(table, keys), best_per_variant(lecture, keys)
    copy_gbs = best_gbps(table, "copy")
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


def verdict(best_gbs: float, yardsticks: dict[str, float]) -> pd.DataFrame:
    """The best kernel's GB/s beside each yardstick (name -> GB/s), and the kernel as a percentage of each."""
    gbs = {"best kernel": best_gbs, **yardsticks}
    share = {"best kernel": 100.0, **{name: 100 * best_gbs / value for name, value in yardsticks.items()}}
    return pd.DataFrame({"GB/s": gbs, "best kernel as % of it": share}).round(1)
