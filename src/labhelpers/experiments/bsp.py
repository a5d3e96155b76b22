"""Chapter "BSP and Amdahl": the measurements, and the summaries the chapter reads off them.

* Parallel slackness: :func:`slackness_grid` lists launches from one warp to many waves;
  :func:`measure_slackness` times :func:`~labhelpers.kernels.bsp.fixed_work` on a fixed array
  for each; :func:`slackness_summary` and :func:`trip_times` read the result with Little's law.
* A measured speedup: :func:`speedup_blocks` and :func:`measure_speedup` time a program of a
  serial step (:func:`~labhelpers.kernels.bsp.serial_chain`) and a parallel step on 1, 2, 4, ...
  blocks; :func:`speedup_summary` fits Amdahl's law to it.

``bench/bsp.py`` stores these tables as the reference data ``ch02_slackness`` and ``ch02_speedup``.
:func:`compare_summaries` puts the reference GPU's summary beside this GPU's, when the chapter measured
one.
"""

from __future__ import annotations

from typing import Callable, Sequence

import numpy as np
import pandas as pd
from numba import cuda

from .. import gpus
from ..arrays import to_host
from ..measured import Measured
from ..kernels.bsp import (
    empty_kernel,
    fixed_work_bytes,
    fixed_work_flops,
    fixed_work_launcher,
    fixed_work_reference,
    serial_chain_launcher,
)
from ..models.amdahl import efficiency, fit_serial_fraction, karp_flatt, max_speedup
from ..sweep import STATUS_OK, sweep
from ..timing import Timing, benchmark


# --------------------------------------------------------------------------- parallel slackness
def slackness_grid(sm_count: int, *, threads: int = 256, max_blocks_per_sm: int = 32,
                   first_threads: Sequence[int] = (32, 64, 128)) -> list[tuple[int, int]]:
    """The ``(blocks, threads)`` launches of the slackness sweep, from one warp to many waves.

    First single blocks of ``first_threads`` threads (one warp, two, four), then blocks of
    ``threads`` threads: 1, 2, 4, ... while fewer than ``sm_count`` (each new block can land
    on an idle SM), then ``sm_count * k`` for k = 1, 2, 4, ... ``max_blocks_per_sm``.

    Example:
        >>> slackness_grid(4, threads=64, max_blocks_per_sm=2, first_threads=(32,))
        [(1, 32), (1, 64), (2, 64), (4, 64), (8, 64)]
    """
    if sm_count < 1 or threads < 1 or max_blocks_per_sm < 1:
        raise ValueError(f"sm_count, threads and max_blocks_per_sm must be >= 1, got {sm_count}, {threads}, "
                         f"{max_blocks_per_sm}")
    grid = [(1, t) for t in first_threads if t < threads]
    blocks = 1
    while blocks < sm_count:
        grid.append((blocks, threads))
        blocks *= 2
    k = 1
    while k <= max_blocks_per_sm:
        grid.append((sm_count * k, threads))
        k *= 2
    return grid


def measure_slackness(n: int, launches: Sequence[tuple[int, int]], *, sm_count: int, reps: int = 8,
                      threads_per_sm: int | None = None, repeat: int = 10, progress: bool = True) -> pd.DataFrame:
    """Time :func:`fixed_work` on a fixed ``n``-element array for each ``(blocks, threads)`` launch.

    Returns the sweep table (see :func:`labhelpers.sweep`) with, per launch, ``blocks``,
    ``threads``, ``total_threads``, ``fill`` (total threads over the ``sm_count * threads_per_sm``
    threads the GPU can hold at once: 1 means every thread slot of every SM is taken once; ``threads_per_sm``
    defaults to this GPU's, the reference GPU's under the simulator: :func:`labhelpers.gpus.current`)
    and ``gelems`` (billions of elements per second), beside the usual ``median_ms``,
    ``gbps`` and ``gflops``. Under the simulator the kernel runs once per launch (checking
    it) and the timing columns are NaN.
    """
    threads_per_sm = gpus.current().sm.max_threads_per_sm if threads_per_sm is None else threads_per_sm
    if n < 1 or sm_count < 1 or threads_per_sm < 1:
        raise ValueError(f"n, sm_count and threads_per_sm must be at least 1, got {n}, {sm_count}, {threads_per_sm}")
    rng = np.random.default_rng(0)
    x_h = rng.random(n, dtype=np.float32)
    x_d = cuda.to_device(x_h)
    out_d = cuda.device_array_like(x_d)
    expected = fixed_work_reference(x_h, reps)
    by_index = dict(enumerate(launches))

    def run(launch: int) -> Timing:
        blocks, threads = by_index[launch]
        fn = fixed_work_launcher(x_d, out_d, blocks, threads, reps)
        total = blocks * threads
        # a single warp takes long over a big array: fewer repetitions where one run is long
        reps_here = max(3, repeat // 3) if total < 4 * threads_per_sm else repeat
        timing = benchmark(fn, nbytes=fixed_work_bytes(n), flops=fixed_work_flops(n, reps), warmup=1,
                           repeat=reps_here, label=fn.__name__)
        if not np.allclose(to_host(out_d), expected, rtol=1e-4, atol=1e-5):
            raise AssertionError(f"fixed_work gave a wrong result on the grid {blocks} x {threads}")
        return timing

    table = sweep(run, {"launch": list(by_index)}, progress=progress, desc="slackness")
    table.insert(1, "blocks", [by_index[i][0] for i in table["launch"]])
    table.insert(2, "threads", [by_index[i][1] for i in table["launch"]])
    table.insert(3, "total_threads", table["blocks"] * table["threads"])
    table.insert(4, "fill", table["total_threads"] / (sm_count * threads_per_sm))
    table["gelems"] = n / (table["median_ms"] * 1e-3) / 1e9
    table["n"] = n
    table["reps"] = reps
    return table.drop(columns="launch")


# --------------------------------------------------------------------------- measured speedup
def speedup_blocks(sm_count: int) -> list[int]:
    """Block counts of the speedup measurement: 1, 2, 4, ... below ``sm_count``, then ``sm_count``.

    Never more blocks than SMs, so that (on an otherwise idle GPU) each block gets an SM of its own.

    Example:
        >>> speedup_blocks(132)
        [1, 2, 4, 8, 16, 32, 64, 128, 132]
    """
    if sm_count < 1:
        raise ValueError(f"sm_count must be at least 1, got {sm_count}")
    blocks, b = [], 1
    while b < sm_count:
        blocks.append(b)
        b *= 2
    return blocks + [sm_count]


def measure_speedup(n: int, blocks: Sequence[int], *, threads: int = 1024, reps: int = 256,
                    serial_steps: int = 20_000, repeat: int = 10, progress: bool = True) -> pd.DataFrame:
    """Time a program = a serial step + a parallel step, with the parallel step on 1, 2, 4, ... blocks.

    The serial step is :func:`serial_chain` (one thread, ``serial_steps`` dependent
    multiply-adds); the parallel step is :func:`fixed_work` over ``n`` elements with
    ``reps`` multiply-adds each, on ``blocks`` blocks of ``threads`` threads. With at most one
    block per SM (``blocks <= SM count``) each block runs on its own SM, so ``blocks`` is the
    number of processors.

    Returns one row per ``blocks``: ``program_ms`` (both kernels, back to back in one stream,
    timed together with CUDA events), ``parallel_ms`` and ``serial_ms`` (each alone),
    ``empty_ms`` (an empty kernel's launch), ``speedup`` (``program_ms`` at the first
    ``blocks`` over ``program_ms``) and ``status``. Timing columns are NaN under the simulator.
    """
    blocks = [int(b) for b in blocks]
    if not blocks or sorted(blocks) != blocks or blocks[0] != 1:
        raise ValueError(f"blocks must be increasing and start at 1 (the one-processor baseline), got {blocks}")
    rng = np.random.default_rng(1)
    x_h = rng.random(n, dtype=np.float32)
    x_d = cuda.to_device(x_h)
    out_d = cuda.device_array_like(x_d)
    fixed_work_launcher(x_d, out_d, blocks[-1], threads, reps)  # validates the largest grid before anything runs
    state_d = cuda.to_device(np.ones(1, dtype=np.float32))
    serial = serial_chain_launcher(state_d, serial_steps)
    empty_d = cuda.device_array(1, dtype=np.float32)
    empty = empty_kernel[1, 1]

    def program(b: int) -> Callable[[], None]:
        parallel = fixed_work_launcher(x_d, out_d, b, threads, reps)

        def run_program() -> None:
            serial()  # superstep 1: the serial part
            parallel()  # superstep 2: the parallel part (stream order is the barrier between them)

        run_program.__name__ = f"program[{b}]"
        return run_program

    def run_program_at(blocks: int) -> Timing:
        return benchmark(program(blocks), repeat=repeat, warmup=2)

    def run_parallel_at(blocks: int) -> Timing:
        return benchmark(fixed_work_launcher(x_d, out_d, blocks, threads, reps), repeat=repeat, warmup=2)

    table = sweep(run_program_at, {"blocks": blocks}, progress=progress, desc="program")
    par = sweep(run_parallel_at, {"blocks": blocks}, progress=progress, desc="parallel part")
    if not np.allclose(to_host(out_d), fixed_work_reference(x_h, reps), rtol=1e-4, atol=1e-5):
        raise AssertionError("fixed_work gave a wrong result in the speedup measurement")
    serial_t = benchmark(serial, repeat=repeat, warmup=2)
    # The Python clock on purpose: the barrier l of chapter 2 is what an empty launch from Python costs.
    empty_t = benchmark(lambda: empty(empty_d), repeat=repeat, warmup=2, number=10, clock="python")
    nan = float("nan")
    out = pd.DataFrame({
        "blocks": table["blocks"],
        "threads": threads,
        "program_ms": table["median_ms"],
        "parallel_ms": par["median_ms"].to_numpy(),
        "serial_ms": serial_t.median_ms if serial_t.is_gpu_timing else nan,
        "empty_ms": empty_t.median_ms if empty_t.is_gpu_timing else nan,
    })
    out["speedup"] = out["program_ms"].iloc[0] / out["program_ms"]
    out["n"] = n
    out["reps"] = reps
    out["serial_steps"] = serial_steps
    out["status"] = table["status"]
    return out


def speedup_summary(table: pd.DataFrame) -> dict:
    """Fit Amdahl's law to a :func:`measure_speedup` table and read its serial part directly.

    Only rows with status ``ok`` (real GPU timings) count; with fewer than two, the numbers
    are NaN and the table is empty. Returns a dict:

    * ``s_fit``: the least-squares serial fraction (:func:`~labhelpers.models.amdahl.fit_serial_fraction`);
    * ``max_speedup``: ``1 / s_fit``;
    * ``s_measured``: the serial kernel's time over the one-block program's time;
    * ``launch_share``: one empty launch over the same;
    * ``table``: per block count > 1, ``blocks``, ``speedup``, ``efficiency`` (speedup / blocks) and
      ``karp_flatt`` (the serial fraction read off that one measurement).
    """
    nan = float("nan")
    ok = table[table["status"] == STATUS_OK] if "status" in table else table
    ok = ok[ok["speedup"].notna()]
    columns = ["blocks", "speedup", "efficiency", "karp_flatt"]
    if len(ok) < 2:
        return {"s_fit": nan, "max_speedup": nan, "s_measured": nan, "launch_share": nan,
                "table": pd.DataFrame(columns=columns)}
    blocks = ok["blocks"].to_numpy(dtype=float)
    speedup = ok["speedup"].to_numpy(dtype=float)
    s_fit = fit_serial_fraction(blocks, speedup)
    t1 = float(ok.loc[ok["blocks"] == ok["blocks"].min(), "program_ms"].iloc[0])
    many = blocks > 1
    per_point = pd.DataFrame({
        "blocks": ok["blocks"].to_numpy()[many],
        "speedup": speedup[many],
        "efficiency": efficiency(speedup[many], blocks[many]),
        "karp_flatt": karp_flatt(speedup[many], blocks[many]),
    }, columns=columns)
    return {
        "s_fit": s_fit,
        "max_speedup": float(max_speedup(s_fit)),
        "s_measured": float(ok["serial_ms"].iloc[0]) / t1,
        "launch_share": float(ok["empty_ms"].iloc[0]) / t1,
        "table": per_point,
    }


def slackness_summary(table: pd.DataFrame) -> dict:
    """Read the knee off a :func:`measure_slackness` table and explain it with Little's law.

    Only rows with status ``ok`` (real GPU timings) count; without any, every number is NaN.

    Returns a dict:
        ``best_gbps``: the highest bandwidth of the sweep.
        ``fill_50``, ``fill_90``: the smallest fill reaching 50 % and 90 % of it.
        ``one_warp_gbps``: the smallest launch (one warp).
        ``iteration_ns``: how long one warp takes per trip round the grid-stride loop, from the
        one-warp launch (32 threads x 8 bytes per trip / its bandwidth): a memory round trip
        plus the loop's own instructions, on an otherwise idle GPU.
        ``little_threads``: Little's law, concurrency = throughput x latency: threads that must each
        have one element in flight to sustain ``best_gbps`` if every trip took ``iteration_ns``.
        ``little_fill``: the same as a fill (over SMs x threads per SM of the GPU that measured).
    """
    nan = float("nan")
    ok = table[table["status"] == STATUS_OK] if "status" in table else table
    ok = ok[ok["gbps"].notna()].sort_values("fill")
    if ok.empty:
        return {k: nan for k in ("best_gbps", "fill_50", "fill_90", "one_warp_gbps", "iteration_ns",
                                 "little_threads", "little_fill")}
    best = float(ok["gbps"].max())
    one = ok[ok["total_threads"] == ok["total_threads"].min()].iloc[0]
    per_element = fixed_work_bytes(1)
    iteration_ns = float(one["total_threads"]) * per_element / float(one["gbps"])  # bytes / (GB/s) = ns
    little_threads = best * iteration_ns / per_element
    slots = float(one["total_threads"]) / float(one["fill"])  # SMs x threads per SM
    return {
        "best_gbps": best,
        "fill_50": float(ok.loc[ok["gbps"] >= 0.5 * best, "fill"].iloc[0]),
        "fill_90": float(ok.loc[ok["gbps"] >= 0.9 * best, "fill"].iloc[0]),
        "one_warp_gbps": float(one["gbps"]),
        "iteration_ns": iteration_ns,
        "little_threads": little_threads,
        "little_fill": little_threads / slots,
    }


def trip_times(table: pd.DataFrame) -> pd.DataFrame:
    """How long one trip round :func:`fixed_work`'s grid-stride loop takes, launch by launch.

    While every thread of a launch is resident (``fill <= 1``), each thread has one element
    (8 bytes: a load and a store) under way at a time, so Little's law gives the average
    time of one trip: ``total_threads * 8 bytes / bandwidth``. Launches with ``fill > 1`` run
    in waves and are left out, as are rows without a GPU timing.

    Returns:
        One row per launch: ``blocks``, ``threads``, ``total_threads``, ``fill``, ``gbps`` and
        ``trip_ns`` (nanoseconds per trip).
    """
    ok = table[table["status"] == STATUS_OK] if "status" in table else table
    ok = ok[ok["gbps"].notna() & (ok["fill"] <= 1)].sort_values("fill")
    out = ok[["blocks", "threads", "total_threads", "fill", "gbps"]].reset_index(drop=True)
    out["trip_ns"] = out["total_threads"] * fixed_work_bytes(1) / out["gbps"].astype(float)  # bytes / (GB/s) = ns
    return out


# --------------------------------------------------------------------------- reference beside this GPU
#: The numbers of :func:`slackness_summary` that :func:`compare_summaries` shows, and how it names them.
SLACKNESS_ROWS = {"one_warp_gbps": "one warp (GB/s)", "best_gbps": "best (GB/s)", "fill_50": "fill at 50 % of best",
                  "fill_90": "fill at 90 % of best", "iteration_ns": "one trip, one warp alone (ns)",
                  "little_threads": "Little's law: threads in flight", "little_fill": "Little's law: fill"}
#: The numbers of :func:`speedup_summary` that :func:`compare_summaries` shows, and how it names them.
SPEEDUP_ROWS = {"s_fit": "fitted serial fraction s", "max_speedup": "bound 1/s", "s_measured": "serial kernel / T(1)",
                "launch_share": "one empty launch / T(1)", "best_speedup": "best measured speedup",
                "t1_ms": "T(1), one block (ms)", "serial_ms": "serial kernel (ms)", "empty_us": "one empty launch (µs)"}


def _speedup_numbers(table: pd.DataFrame) -> dict:
    fit = speedup_summary(table)
    ok = table[table["status"] == STATUS_OK] if "status" in table else table
    ok = ok[ok["speedup"].notna()]
    nan = float("nan")
    first = ok.iloc[0] if len(ok) else None
    return {**fit, "best_speedup": float(ok["speedup"].max()) if len(ok) else nan,
            "t1_ms": float(first["program_ms"]) if first is not None else nan,
            "serial_ms": float(first["serial_ms"]) if first is not None else nan,
            "empty_us": float(first["empty_ms"]) * 1e3 if first is not None else nan}


def compare_summaries(measured: Measured, kind: str) -> pd.DataFrame:
    """The chapter's summary numbers of the reference GPU, beside this GPU's when they were measured here.

    Args:
        measured: ``lh.live_or_reference(table, "ch02_slackness")`` or ``(..., "ch02_speedup")``.
        kind: ``"slackness"`` (:func:`slackness_summary`) or ``"speedup"`` (:func:`speedup_summary`).

    Returns:
        One row per number, one column per source, named by its label (``reference: <GPU> (<date>)``,
        ``this GPU: <GPU>``).
    """
    if kind not in ("slackness", "speedup"):
        raise ValueError(f"kind must be 'slackness' or 'speedup', got {kind!r}")
    summarize, rows = ((slackness_summary, SLACKNESS_ROWS) if kind == "slackness" else (_speedup_numbers, SPEEDUP_ROWS))
    tables = []
    if measured.reference is not None:
        tables.append((measured.reference.label, measured.reference.table))
    if measured.is_live:
        tables.append((measured.label, measured.table))
    columns = {}
    for label, table in tables:
        numbers = summarize(table)
        columns[label] = [numbers[key] for key in rows]
    return pd.DataFrame(columns, index=pd.Index(list(rows.values()), name=kind))
