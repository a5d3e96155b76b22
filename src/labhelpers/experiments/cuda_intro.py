"""Chapter "CUDA in Python": SAXPY timed three ways, the table chapter 1 plots, and its two kernels against the copy.

:func:`time_saxpy` times one size one way (host NumPy, GPU with the host-device transfers,
GPU kernel only) and :func:`saxpy_three_ways` sweeps sizes and ways (``bench/cuda_intro.py``
stores the result as reference ``ch01_saxpy_three_ways``); :func:`saxpy_summary` reads it at
one size. :func:`saxpy_kernels` times the chapter's two SAXPY kernels (one element per thread,
and four per thread with 16-byte accesses) on the GPU alone, beside the copy measured in the same
run (reference ``ch01_saxpy_kernels``). The kernels and their specification are in
:mod:`labhelpers.kernels.cuda_intro`.

:func:`asynchronous_error` shows when a GPU reports an error in a kernel: not at the launch,
which returns at once, but at the next call that waits for the GPU. On a GPU it runs in a
child process, because such an error leaves the CUDA context unusable.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from typing import Callable, Sequence

import numpy as np
import pandas as pd
from numba import cuda

from .. import backend
from ..kernels.cuda_intro import (saxpy, saxpy_bytes, saxpy_flops, saxpy_numpy, saxpy_vec4, saxpy_vec4_blocks,
                                  write_at)
from ..launch import blocks_for, launch_1d
from ..roofline.measure import measure_dram_bandwidth
from ..sweep import STATUS_OK, STATUS_SIM, sweep
from ..timing import Timing, benchmark, wall_time

HOST_NUMPY = "host: NumPy"
GPU_WITH_TRANSFERS = "GPU incl. transfers"
GPU_KERNEL_ONLY = "GPU kernel only"
#: The three ways of running SAXPY that chapter 1 compares, in the order it plots them.
SAXPY_METHODS: tuple[str, ...] = (HOST_NUMPY, GPU_WITH_TRANSFERS, GPU_KERNEL_ONLY)
#: Sizes of the reference sweep: 2^10 to 2^28 float32 elements (4 KiB to 1 GiB per vector).
SAXPY_SIZES: tuple[int, ...] = tuple(2**k for k in range(10, 29))


def _repeats(n: int) -> int:
    """Fewer repetitions for big sizes: a 2^28 NumPy SAXPY takes about a second."""
    if n <= 2**20:
        return 20
    if n <= 2**24:
        return 10
    return 5


def time_saxpy(n: int, method: str, *, threads: int = 256, repeat: int | None = None, seed: int = 0,
               clock: str = "python") -> Timing:
    """Time SAXPY on ``n`` float32 elements one of the three ways of :data:`SAXPY_METHODS`.

    * ``host: NumPy``: ``a * x + y`` on the CPU, timed with the host clock (:func:`~labhelpers.timing.wall_time`).
    * ``GPU incl. transfers``: the five steps each time: allocate, copy x and y to the device,
      launch, copy the result back (pageable host memory), timed with CUDA events.
    * ``GPU kernel only``: x, y and out already on the device; only the launch is timed.

    Both GPU ways use the Python clock by default (``benchmark(..., clock="python")``: events around the call as
    Python makes it), on purpose: the chapter's lesson is what a call from Python costs, the launch included.
    ``clock="gpu"`` times the GPU's work only (the bench's kernel row).

    Every way states the same useful bytes (:func:`saxpy_bytes`: read x and y, write out), so the
    GB/s of the three are directly comparable. The result of each way is checked against NumPy
    before timing.

    Raises:
        ValueError: an unknown ``method``.
    """
    if method not in SAXPY_METHODS:
        raise ValueError(f"unknown SAXPY method {method!r}: use one of {', '.join(map(repr, SAXPY_METHODS))}")
    rng = np.random.default_rng(seed)
    a = np.float32(2.0)
    x = rng.random(n, dtype=np.float32)  # uniform [0, 1): quick to generate even for 2^28 elements
    y = rng.random(n, dtype=np.float32)
    expected = saxpy_numpy(a, x, y)
    out_h = np.empty_like(x)
    repeat = repeat or _repeats(n)
    nbytes, flops = saxpy_bytes(n), saxpy_flops(n)

    if method == HOST_NUMPY:
        return wall_time(lambda: saxpy_numpy(a, x, y, out_h), repeat=repeat, nbytes=nbytes, flops=flops,
                         label=f"SAXPY n={n}, {method}")

    blocks, threads = launch_1d(n, threads)
    if method == GPU_WITH_TRANSFERS:
        def five_steps() -> None:
            x_d = cuda.to_device(x)  # steps 1 and 2: allocate on the device and copy in
            y_d = cuda.to_device(y)
            out_d = cuda.device_array(n, dtype=np.float32)
            saxpy[blocks, threads](a, x_d, y_d, out_d)  # step 3: launch
            out_d.copy_to_host(out_h)  # step 4: copy out (waits for the kernel)
            # step 5: x_d, y_d and out_d are freed when they go out of scope

        work = five_steps
    else:
        x_d, y_d = cuda.to_device(x), cuda.to_device(y)
        out_d = cuda.device_array(n, dtype=np.float32)

        def work() -> None:
            saxpy[blocks, threads](a, x_d, y_d, out_d)

        work()
        out_d.copy_to_host(out_h)
    # The Python clock on purpose: this curve teaches what one call from Python costs (the launch included).
    timing = benchmark(work, repeat=repeat, nbytes=nbytes, flops=flops, label=f"SAXPY n={n}, {method}",
                       clock=clock)
    if method == GPU_KERNEL_ONLY:
        out_d.copy_to_host(out_h)
    if not np.allclose(out_h, expected, rtol=1e-5, atol=1e-6):
        raise RuntimeError(f"SAXPY ({method}, n={n}) disagrees with NumPy: the timing would be meaningless")
    return timing


def saxpy_three_ways(sizes: Sequence[int] = SAXPY_SIZES, methods: Sequence[str] = SAXPY_METHODS, *,
                     threads: int = 256, progress: bool = True) -> pd.DataFrame:
    """Time SAXPY for every size and method: the table chapter 1 plots (reference ``ch01_saxpy_three_ways``).

    Returns:
        A :func:`~labhelpers.sweep.sweep` table: ``n``, ``method``, ``median_ms``, ``min_ms``,
        ``spread``, ``gbps`` (useful bytes ``12 n`` over the median time), ``gflops``, ``status``, ``reason``.
    """
    return sweep(lambda n, method: time_saxpy(n, method, threads=threads),
                 {"n": list(sizes), "method": list(methods)}, progress=progress, desc="SAXPY three ways")


def saxpy_summary(table: pd.DataFrame, n: int | None = None) -> pd.DataFrame:
    """One row per method at size ``n`` (default: the largest timed size): time, GB/s, and time over kernel-only.

    Rows without a GPU timing (simulator runs) show NaN.
    """
    timed = table[table["status"] == STATUS_OK] if "status" in table else table
    if n is None:
        n = int(timed["n"].max()) if len(timed) else int(table["n"].max())
    at_n = table[table["n"] == n].set_index("method")
    methods = [m for m in SAXPY_METHODS if m in at_n.index] + [m for m in at_n.index if m not in SAXPY_METHODS]
    at_n = at_n.loc[methods]
    median_ms = at_n["median_ms"].astype(float)
    gbps = at_n["gbps"].astype(float)
    kernel_ms = median_ms.get(GPU_KERNEL_ONLY, np.nan)
    summary = pd.DataFrame({
        "median_ms": median_ms,
        "GB/s (12n bytes / time)": gbps,
        "x slower than kernel only": median_ms / kernel_ms,
    })
    summary.index.name = f"SAXPY, n = 2^{int(np.log2(n))}" if n & (n - 1) == 0 else f"SAXPY, n = {n}"
    return summary.round(3)


# --------------------------------------------------------------------------- the two kernels against the copy
#: Elements of :func:`saxpy_kernels`' reference run: 2^26 float32 (256 MiB per vector, far beyond the L2 cache).
SAXPY_KERNELS_N = 2**26
#: The launches :func:`saxpy_kernels` times: ``(kernel, threads per block)``, the chapter's kernel first.
SAXPY_KERNEL_RUNS: tuple[tuple[str, int], ...] = (("saxpy", 128), ("saxpy", 256), ("saxpy", 1024),
                                                  ("saxpy_vec4", 256))
#: The row of :func:`saxpy_kernels`' table that holds the copy, the yardstick of the same run.
COPY_ROW = "D2D copy (yardstick)"
_KERNELS = {"saxpy": (saxpy, 1), "saxpy_vec4": (saxpy_vec4, 4)}
#: Columns of :func:`saxpy_kernels`' table.
SAXPY_KERNEL_COLUMNS = ["kernel", "threads", "elements_per_thread", "blocks", "n", "median_ms", "gbps",
                        "of_copy", "status", "how"]


def _grid(kernel: str, n: int, threads: int) -> int:
    return saxpy_vec4_blocks(n, threads) if kernel == "saxpy_vec4" else blocks_for(n, threads)


def saxpy_kernels(n: int = SAXPY_KERNELS_N, runs: Sequence[tuple[str, int]] = SAXPY_KERNEL_RUNS, *,
                  repeat: int = 20, copy: bool = True) -> pd.DataFrame:
    """The chapter's two SAXPY kernels on ``n`` float32 elements, GPU time only, against the copy of the same run.

    Every launch of ``runs`` (``saxpy`` at one element per thread, ``saxpy_vec4`` at one group of four per
    thread) is checked first: on a GPU bit for bit against ``saxpy`` at 256 threads (both contract ``a * x + y``
    into one fused multiply-add), under the simulator against NumPy. Then it is timed with
    :func:`~labhelpers.timing.benchmark`'s default clock (the GPU's work alone, the stream held), charged
    ``saxpy_bytes(n)`` (read x and y, write out). The last row, :data:`COPY_ROW`, is the copy yardstick measured
    in the same run, :func:`labhelpers.roofline.measure_dram_bandwidth` (the fastest device-to-device copy of
    1 GiB, bytes read + written; on a GPU only, ``copy=False`` leaves it out); ``of_copy`` is each row's GB/s over it.

    Returns:
        :data:`SAXPY_KERNEL_COLUMNS`; under the simulator the timings are NaN and ``status`` says ``simulator``.

    Raises:
        ValueError: an unknown kernel in ``runs``.
        RuntimeError: a kernel whose result disagrees (its time would be meaningless).
    """
    unknown = [k for k, _ in runs if k not in _KERNELS]
    if unknown:
        raise ValueError(f"unknown SAXPY kernel(s) {unknown}: use {sorted(_KERNELS)}")
    rng = np.random.default_rng(0)
    a = np.float32(2.0)
    x_h = rng.standard_normal(n, dtype=np.float32)
    y_h = rng.standard_normal(n, dtype=np.float32)
    x, y = cuda.to_device(x_h), cuda.to_device(y_h)
    out = cuda.device_array(n, dtype=np.float32)
    sim = backend.is_simulator()
    if sim:
        want = saxpy_numpy(a, x_h, y_h)
    else:
        saxpy[blocks_for(n, 256), 256](a, x, y, out)
        want = out.copy_to_host()
    rows = []
    for kernel, threads in runs:
        fn, per_thread = _KERNELS[kernel]
        blocks = _grid(kernel, n, threads)
        launch = fn[blocks, threads]
        out.copy_to_device(np.full(n, np.nan, dtype=np.float32))
        launch(a, x, y, out)
        got = out.copy_to_host()
        same = np.allclose(got, want, rtol=1e-6, atol=1e-6) if sim else np.array_equal(got, want)
        if not same:
            raise RuntimeError(f"{kernel} at {threads} threads disagrees with the chapter's saxpy: its time "
                               "would be meaningless")
        t = benchmark(lambda: launch(a, x, y, out), nbytes=saxpy_bytes(n), flops=saxpy_flops(n), repeat=repeat,
                      label=f"{kernel}, {threads} threads")
        rows.append({"kernel": kernel, "threads": threads, "elements_per_thread": per_thread, "blocks": blocks,
                     "n": n, "median_ms": t.median_ms if t.is_gpu_timing else np.nan,
                     "gbps": t.gbps if t.is_gpu_timing else np.nan,
                     "status": STATUS_OK if t.is_gpu_timing else STATUS_SIM, "how": t.label})
    copy_gbs = np.nan
    if copy and not sim:
        c = measure_dram_bandwidth()
        copy_gbs = c.value
        rows.append({"kernel": COPY_ROW, "threads": np.nan, "elements_per_thread": np.nan, "blocks": np.nan,
                     "n": np.nan, "median_ms": np.nan, "gbps": c.value, "status": STATUS_OK, "how": c.how})
    table = pd.DataFrame(rows, columns=SAXPY_KERNEL_COLUMNS)
    table["of_copy"] = table["gbps"] / copy_gbs
    return table


def saxpy_kernels_summary(table: pd.DataFrame) -> pd.DataFrame:
    """:func:`saxpy_kernels`' table as the chapter prints it: one row per launch, GB/s and the fraction of the copy."""
    t = table[table["kernel"] != COPY_ROW]
    summary = pd.DataFrame({
        "kernel": t["kernel"],
        "threads/block": t["threads"].astype(int),
        "elements/thread": t["elements_per_thread"].astype(int),
        "time (µs)": t["median_ms"].astype(float) * 1e3,
        "GB/s": t["gbps"].astype(float),
        "of the copy": t["of_copy"].astype(float),
    })
    return summary.round({"time (µs)": 1, "GB/s": 0, "of the copy": 3}).reset_index(drop=True)


# --------------------------------------------------------------------------- an error the GPU reports late
#: The element :func:`asynchronous_error` writes to in a 16-element array: 2^40 int32 elements, 4 TiB, past
#: its end, an address no allocation owns.
FAR_INDEX = 2**40
#: Columns of :func:`asynchronous_error`'s table.
ASYNC_ERROR_COLUMNS = ["step", "returned after (ms)", "result"]
_ASYNC_STEPS = (
    "1. launch write_at in bounds, then cuda.synchronize() (compiles it; no error)",
    "2. launch write_at 4 TiB past the end of the array",
    "3. host work meanwhile: a NumPy sum",
    "4. cuda.synchronize(): wait for the GPU",
    "5. afterwards: a new allocation, cuda.to_device",
)


def _async_error_steps(emit: Callable[[dict], None]) -> None:
    """Run the five steps of the demonstration on the current backend, calling ``emit`` with each row."""

    def step(what: str, call: Callable[[], object]) -> None:
        t0 = time.perf_counter()
        try:
            call()
            result = "ok: no error"
        except Exception as exc:  # noqa: BLE001  (reporting every error is the point of the demonstration)
            message = getattr(exc, "msg", None) or str(exc)
            result = f"{type(exc).__name__}: {message}"
        emit({"step": what, "returned after (ms)": (time.perf_counter() - t0) * 1e3, "result": result})

    out = cuda.device_array(16, dtype=np.int32)
    first, far, host, sync, alloc = _ASYNC_STEPS
    step(first, lambda: (write_at[1, 1](out, 0, 1), cuda.synchronize()))
    step(far, lambda: write_at[1, 1](out, FAR_INDEX, 1))
    step(host, lambda: np.ones(10**6).sum())
    step(sync, cuda.synchronize)
    step(alloc, lambda: cuda.to_device(np.ones(4)))


def _async_error_child() -> None:
    """Entry point of the child process on a GPU: one JSON line per step on stdout, as it happens."""
    _async_error_steps(lambda row: print(json.dumps(row), flush=True))


def asynchronous_error(timeout: float = 300) -> pd.DataFrame:
    """Launch a kernel that writes far out of bounds, and record which call reports the error.

    The steps: (1) launch :func:`~labhelpers.kernels.cuda_intro.write_at` in bounds and synchronise
    (this compiles it); (2) launch it again with an index 4 TiB past the end of a 16-element
    array; (3) do some host work; (4) ``cuda.synchronize()``; (5) allocate again.

    On a GPU the launch (2) returns at once without an error; the kernel faults on the GPU
    meanwhile, and the error (``CUDA_ERROR_ILLEGAL_ADDRESS``) is reported by the next call that
    waits for the GPU (4). Such an error is *sticky*: the CUDA context is lost and every later
    call fails too (5), until the process restarts. That is why, on a GPU, the steps run in a
    child process: the notebook's own context stays usable. Under the simulator, which runs
    a kernel to completion inside the launch call and checks every index, the launch itself
    raises ``IndexError``.

    Returns:
        One row per step: ``step``, ``returned after (ms)`` (host clock) and ``result`` (``ok: no
        error`` or the exception's type and message).
    """
    if backend.is_simulator():
        rows: list[dict] = []
        _async_error_steps(rows.append)
        return pd.DataFrame(rows, columns=ASYNC_ERROR_COLUMNS)
    package_root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    paths = [package_root] + [p for p in sys.path if p and os.path.isdir(p)]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(paths))
    code = "import labhelpers; from labhelpers.experiments.cuda_intro import _async_error_child; _async_error_child()"
    try:
        proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                              timeout=timeout)
        stdout, why = proc.stdout, f"exit code {proc.returncode}"
    except subprocess.TimeoutExpired as exc:
        stdout = exc.stdout.decode() if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        why = f"no answer within {timeout:.0f} s"
    rows = []
    for line in stdout.splitlines():
        if line.startswith("{"):
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError:
                pass
    for missing in _ASYNC_STEPS[len(rows):]:
        rows.append({"step": missing, "returned after (ms)": float("nan"),
                     "result": f"not reached: the child process stopped ({why})"})
    return pd.DataFrame(rows, columns=ASYNC_ERROR_COLUMNS)
