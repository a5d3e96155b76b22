"""Chapter "BSP and Amdahl": supersteps, parallel slackness and a measured speedup.

Three groups of kernels:

* :func:`fixed_work`: a grid-stride loop that applies ``reps`` fused multiply-adds to
  every element of a fixed array. The *work* is fixed by the array; the *grid* can be
  anything from one warp to many waves of blocks, which is what the parallel-slackness
  measurement varies (:func:`measure_slackness`; :func:`slackness_summary` and
  :func:`trip_times` read the result with Little's law).
* :func:`serial_chain`: one thread walking a chain of dependent steps, the part of a
  program no number of processors speeds up. Together with :func:`fixed_work` on
  1, 2, 4, ... blocks (one block per SM) it makes the program whose speedup
  :func:`measure_speedup` measures and Amdahl's law fits.
* :func:`block_sums` and :func:`scale`: a sum and a normalisation written as BSP
  supersteps, one kernel launch each; :func:`normalize` runs them.
"""

from __future__ import annotations

from typing import Callable, Sequence

import numpy as np
import pandas as pd
from numba import cuda, float32

from ..arrays import check_array, to_host
from ..errors import LaunchConfigError
from ..launch import check_launch, launch_1d
from ..models.amdahl import efficiency, fit_serial_fraction, karp_flatt, max_speedup
from ..sweep import STATUS_OK, sweep
from ..timing import Timing, benchmark

#: Coefficients of the map ``v -> A * v + B`` that :func:`fixed_work` applies ``reps`` times.
#: |A| < 1 keeps values bounded however many times it is applied.
A = np.float32(0.999)
B = np.float32(0.001)
#: Threads per block of :func:`block_sums` (its shared-memory buffer has this many floats).
SUM_THREADS = 128
#: Resident threads per SM on every GPU from Volta to Hopper (compute capability 7.0, 8.0, 9.0).
THREADS_PER_SM = 2048


# --------------------------------------------------------------------------- fixed work
@cuda.jit
def fixed_work(x, out, a, b, reps):
    """``out[i] = f(x[i])`` with ``f`` = ``reps`` times ``v -> a * v + b``, for every ``i``, on any grid.

    The grid-stride loop starts at the thread's global index and steps by the number of
    threads in the grid, so every element is visited exactly once whether the grid has
    fewer threads than elements (each thread takes several) or more (some take none).

    Each trip waits for its one 4-byte load: the next load cannot move above this trip's
    store (``x`` and ``out`` may be the same array). Compiled for sm_90, a trip with 8
    multiply-adds is about 90 instructions: each ``range`` loop keeps a 64-bit trip counter
    and every ``x[i]`` checks for a negative index, so the load, the FMAs and the store are
    10 of them.
    """
    start = cuda.grid(1)
    stride = cuda.gridsize(1)
    for i in range(start, x.size, stride):  # the loop bound is the bounds check
        v = x[i]
        for _ in range(reps):
            v = a * v + b  # one fused multiply-add
        out[i] = v


def fixed_work_reference(x: np.ndarray, reps: int, a: float = A, b: float = B) -> np.ndarray:
    """NumPy specification of :func:`fixed_work` (in float32, like the kernel)."""
    v = np.asarray(x, dtype=np.float32).copy()
    a, b = np.float32(a), np.float32(b)
    for _ in range(reps):
        v = a * v + b
    return v


def fixed_work_bytes(n: int, itemsize: int = 4) -> int:
    """Bytes :func:`fixed_work` moves through device memory: read ``x``, write ``out``."""
    return 2 * n * itemsize


def fixed_work_flops(n: int, reps: int) -> int:
    """Floating-point operations of :func:`fixed_work`: one multiply and one add per step and element."""
    return 2 * reps * n


def _check_vector(a, name: str, shape: tuple[int, ...] | None = None) -> None:
    """:func:`~labhelpers.check_array` for a float32 vector, accepting the simulator's device arrays too."""
    if hasattr(a, "copy_to_host") and not hasattr(a, "__cuda_array_interface__"):
        a = a.copy_to_host()  # a simulator device array lives in host memory: check a copy
    check_array(a, name, dtype=np.float32, ndim=1, shape=shape)


def _check_grid(blocks: int, threads: int) -> None:
    if isinstance(blocks, bool) or not isinstance(blocks, (int, np.integer)) or blocks < 1:
        raise LaunchConfigError(f"blocks must be a whole number of at least 1, got {blocks!r}")
    if blocks > 2**31 - 1:
        raise LaunchConfigError(f"{blocks} blocks exceeds the grid limit of 2**31 - 1 in x")
    if isinstance(threads, bool) or not isinstance(threads, (int, np.integer)):
        raise LaunchConfigError(f"threads per block must be a whole number, got {threads!r}")
    reason = check_launch(int(threads))
    if reason:
        raise LaunchConfigError(f"{reason}: choose threads per block between 1 and 1024, ideally a multiple of 32.")


def _check_reps(reps: int) -> None:
    if isinstance(reps, bool) or not isinstance(reps, (int, np.integer)) or reps < 0:
        raise ValueError(f"reps (multiply-adds per element) must be a whole number >= 0, got {reps!r}")


def fixed_work_launcher(x_d, out_d, blocks: int, threads: int, reps: int,
                        a: float = A, b: float = B) -> Callable[[], None]:
    """Validate once and return a function that launches :func:`fixed_work` (for :func:`~labhelpers.benchmark`).

    Args:
        x_d, out_d: float32 vectors of equal length, on the device (or NumPy under the simulator).
        blocks, threads: the grid, any size: the kernel's grid-stride loop covers every element.
        reps: multiply-adds per element.
    """
    _check_vector(x_d, "x")
    _check_vector(out_d, "out", shape=tuple(x_d.shape))
    _check_grid(blocks, threads)
    _check_reps(reps)
    a32, b32, r = np.float32(a), np.float32(b), int(reps)
    kernel = fixed_work[int(blocks), int(threads)]

    def launch() -> None:
        kernel(x_d, out_d, a32, b32, r)

    launch.__name__ = f"fixed_work[{blocks}, {threads}]"
    return launch


def run_fixed_work(x: np.ndarray, blocks: int, threads: int = 256, reps: int = 8,
                   a: float = A, b: float = B) -> np.ndarray:
    """Copy ``x`` to the device, run :func:`fixed_work` on a ``blocks x threads`` grid, return the result.

    Any grid gives the same answer; that is the point of the grid-stride loop.
    """
    _check_vector(x, "x")
    x_d = cuda.to_device(x)
    out_d = cuda.device_array_like(x_d)
    fixed_work_launcher(x_d, out_d, blocks, threads, reps, a, b)()
    return to_host(out_d)


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
                      threads_per_sm: int = THREADS_PER_SM, repeat: int = 10, progress: bool = True) -> pd.DataFrame:
    """Time :func:`fixed_work` on a fixed ``n``-element array for each ``(blocks, threads)`` launch.

    Returns the sweep table (see :func:`labhelpers.sweep`) with, per launch, ``blocks``,
    ``threads``, ``total_threads``, ``fill`` (total threads over the ``sm_count * threads_per_sm``
    threads the GPU can hold at once: 1 means every thread slot of every SM is taken once)
    and ``gelems`` (billions of elements per second), beside the usual ``median_ms``,
    ``gbps`` and ``gflops``. Under the simulator the kernel runs once per launch (checking
    it) and the timing columns are NaN.
    """
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


@cuda.jit
def serial_chain(state, steps, a, b):
    """One thread applies ``v -> a * v + b`` ``steps`` times to ``state[0]``: a chain no grid can shorten.

    Each step needs the previous step's result, so the chain takes ``steps`` times the
    latency of one step whatever the launch; extra threads do nothing. That latency is not
    the FMA's 4 cycles: the 64-bit trip counter of Numba's ``range`` loop (compare, select,
    add with carry) is a longer dependent chain: 20,000 steps take 0.24 ms on an H200,
    about 12 ns (24 clock cycles) a step, launch included.
    """
    if cuda.grid(1) == 0:
        v = state[0]
        for _ in range(steps):
            v = a * v + b
        state[0] = v


def serial_chain_launcher(state_d, steps: int, a: float = A, b: float = B) -> Callable[[], None]:
    """Validate once and return a function that launches :func:`serial_chain` on one thread."""
    _check_vector(state_d, "state")
    if state_d.shape[0] < 1:
        raise ValueError("state must hold at least one element")
    _check_reps(steps)
    a32, b32, s = np.float32(a), np.float32(b), int(steps)
    kernel = serial_chain[1, 1]

    def launch() -> None:
        kernel(state_d, s, a32, b32)

    launch.__name__ = "serial_chain[1, 1]"
    return launch


@cuda.jit
def empty_kernel(x):
    """Does nothing: launching it measures what a superstep's barrier alone costs (BSP's ``l``)."""
    i = cuda.grid(1)
    if i < 0:  # never true; keeps the argument used
        x[0] = 0


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
    _check_grid(blocks[-1], threads)
    rng = np.random.default_rng(1)
    x_h = rng.random(n, dtype=np.float32)
    x_d = cuda.to_device(x_h)
    out_d = cuda.device_array_like(x_d)
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
    empty_t = benchmark(lambda: empty(empty_d), repeat=repeat, warmup=2, number=10)
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
    ok = ok[pd.to_numeric(ok["speedup"], errors="coerce").notna()]
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
        ``little_fill``: the same as a fill (over ``SMs x 2048``).
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
    slots = float(one["total_threads"]) / float(one["fill"])  # SMs x 2048
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
    ok = ok[pd.to_numeric(ok["gbps"], errors="coerce").notna() & (ok["fill"] <= 1)].sort_values("fill")
    out = ok[["blocks", "threads", "total_threads", "fill", "gbps"]].reset_index(drop=True)
    out["trip_ns"] = out["total_threads"] * fixed_work_bytes(1) / out["gbps"].astype(float)  # bytes / (GB/s) = ns
    return out


# --------------------------------------------------------------------------- supersteps
@cuda.jit
def block_sums(x, partial):
    """Superstep: block ``b`` writes the sum of its ``SUM_THREADS`` elements of ``x`` to ``partial[b]``.

    Launch with ``SUM_THREADS`` threads per block and ``ceil(x.size / SUM_THREADS)`` blocks.
    The block's threads cooperate through shared memory, separated by ``syncthreads()``,
    the block-level barrier; blocks never wait for each other.
    """
    buf = cuda.shared.array(SUM_THREADS, float32)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    v = np.float32(0)
    if i < x.size:  # guard the load, never the barrier: threads past the end contribute 0
        v = x[i]
    buf[t] = v
    cuda.syncthreads()  # RAW: every thread's value must be in buf before any thread reads a neighbour's
    step = SUM_THREADS // 2
    while step > 0:
        if t < step:
            buf[t] += buf[t + step]
        cuda.syncthreads()  # RAW: this round's sums must land before the next round reads them
        step //= 2
    if t == 0:
        partial[cuda.blockIdx.x] = buf[0]


@cuda.jit
def scale(x, total, out):
    """Superstep: ``out[i] = x[i] / total[0]``, where ``total`` was written by an earlier launch."""
    i = cuda.grid(1)
    if i < x.size:
        out[i] = x[i] / total[0]


def device_sum(x_d) -> tuple[object, int]:
    """Sum a float32 device vector with :func:`block_sums`, one launch (one superstep) per level.

    Each launch shrinks the vector ``SUM_THREADS`` times: blocks cannot wait for each
    other inside a kernel, so the next level has to be a new launch.

    Returns:
        ``(total_d, supersteps)``: a one-element device array and the number of launches.
    """
    _check_vector(x_d, "x")
    if x_d.shape[0] < 1:
        raise ValueError("cannot sum an empty vector")
    current, launches = x_d, 0
    while True:
        launch = launch_1d(current.shape[0], SUM_THREADS)
        partial = cuda.device_array(launch.blocks, dtype=np.float32)
        block_sums[launch.blocks, SUM_THREADS](current, partial)
        launches += 1
        current = partial
        if launch.blocks == 1:
            return current, launches


def normalize(x: np.ndarray) -> tuple[np.ndarray, int]:
    """``x / x.sum()`` as a sequence of BSP supersteps (kernel launches); returns the result and their count."""
    _check_vector(x, "x")
    if x.shape[0] < 1:
        raise ValueError("cannot normalise an empty vector")
    x_d = cuda.to_device(x)
    total_d, launches = device_sum(x_d)
    out_d = cuda.device_array_like(x_d)
    launch = launch_1d(x.shape[0], 256)
    scale[launch.blocks, launch.threads](x_d, total_d, out_d)
    return to_host(out_d), launches + 1
