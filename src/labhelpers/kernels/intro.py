"""Chapter "CUDA in Python": the first kernels, and SAXPY timed three ways.

Every kernel follows the same anatomy: one thread per element, its global index from
``cuda.grid(1)`` (or ``cuda.grid(2)``), and a bounds check, because the grid is rounded
up to whole blocks and the last block usually has threads with no element to work on.

* :func:`global_index`, :func:`block_and_thread`: where a thread sits in the grid.
* :func:`add`, :func:`saxpy`: one element per thread; :func:`run_saxpy` launches SAXPY
  with checked arguments.
* :func:`add_2d`: a 2D grid over a matrix (x runs along columns, y along rows);
  :func:`run_add_2d` launches it.
* :func:`time_saxpy` and :func:`saxpy_three_ways`: SAXPY on the host with NumPy, on the
  GPU including the host-device transfers, and on the GPU with the data already there.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import pandas as pd
from numba import cuda

from ..arrays import check_array, to_host
from ..launch import launch_1d
from ..models.launch_calc import launch_2d
from ..sweep import STATUS_OK, sweep
from ..timing import Timing, benchmark, wall_time


@cuda.jit
def global_index(out):
    """Write each thread's global index ``blockIdx.x * blockDim.x + threadIdx.x`` into ``out``."""
    i = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    if i < out.size:  # the bounds check: the last block may run past the end
        out[i] = i


@cuda.jit
def block_and_thread(block_of, thread_of):
    """Record, for every element, which block (``blockIdx.x``) and which thread of it (``threadIdx.x``) wrote it."""
    i = cuda.grid(1)  # the same number as blockIdx.x * blockDim.x + threadIdx.x
    if i < block_of.size:
        block_of[i] = cuda.blockIdx.x
        thread_of[i] = cuda.threadIdx.x


@cuda.jit
def add(x, y, out):
    """``out[i] = x[i] + y[i]``, one thread per element."""
    i = cuda.grid(1)
    if i < out.size:
        out[i] = x[i] + y[i]


@cuda.jit
def saxpy(a, x, y, out):
    """``out[i] = a * x[i] + y[i]`` (single-precision a·x plus y), one thread per element."""
    i = cuda.grid(1)
    if i < out.size:
        out[i] = a * x[i] + y[i]


@cuda.jit
def add_2d(a, b, out):
    """``out[row, col] = a[row, col] + b[row, col]`` on a 2D grid: x runs along columns, y along rows."""
    col, row = cuda.grid(2)  # x first: neighbouring threads of a warp take neighbouring columns
    if row < out.shape[0] and col < out.shape[1]:  # both dimensions are rounded up to whole blocks
        out[row, col] = a[row, col] + b[row, col]


def saxpy_bytes(n: int, itemsize: int = 4) -> int:
    """Bytes SAXPY moves through device memory: read x and y, write out."""
    return 3 * n * itemsize


def saxpy_flops(n: int) -> int:
    """Floating-point operations of SAXPY: one multiply and one add per element."""
    return 2 * n


def saxpy_intensity(itemsize: int = 4) -> float:
    """Arithmetic intensity of SAXPY in flop per byte: 2 flops per 3 values moved (1/6 for float32)."""
    return saxpy_flops(1) / saxpy_bytes(1, itemsize)


def saxpy_numpy(a: float, x: np.ndarray, y: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """SAXPY on the host with NumPy: ``a * x + y``, written into ``out`` when given (no temporaries)."""
    out = np.empty_like(x) if out is None else out
    np.multiply(x, x.dtype.type(a), out=out)
    out += y
    return out


def run_saxpy(a: float, x, y, threads: int = 256):
    """Launch :func:`saxpy` on device or host arrays and return the result as a NumPy array.

    Checks the arguments first: equal-length, contiguous, float32 vectors.
    """
    check_array(x, "x", dtype=np.float32, ndim=1)
    check_array(y, "y", dtype=np.float32, ndim=1, shape=tuple(x.shape))
    launch = launch_1d(x.shape[0], threads)
    x_d, y_d = cuda.to_device(x), cuda.to_device(y)
    out_d = cuda.device_array_like(x_d)
    saxpy[launch.blocks, launch.threads](np.float32(a), x_d, y_d, out_d)
    return to_host(out_d)


def run_add_2d(a, b, block: tuple[int, int] = (16, 16)) -> np.ndarray:
    """Launch :func:`add_2d` on two equal-shaped float32 matrices and return ``a + b`` as a NumPy array.

    Args:
        a, b: C-contiguous float32 matrices of the same shape (NumPy or device arrays).
        block: threads per block as ``(x, y)``: x along columns, y along rows.

    Raises:
        ArrayArgumentError: a wrong dtype, shape or layout.
        LaunchConfigError: a block of more than 1024 threads (or a zero dimension).
    """
    check_array(a, "a", dtype=np.float32, ndim=2)
    check_array(b, "b", dtype=np.float32, ndim=2, shape=tuple(a.shape))
    grid, block = launch_2d(tuple(a.shape), block)
    a_d, b_d = cuda.to_device(a), cuda.to_device(b)
    out_d = cuda.device_array_like(a_d)
    add_2d[grid, block](a_d, b_d, out_d)
    return to_host(out_d)


# --- SAXPY three ways -------------------------------------------------------------------------

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


def time_saxpy(n: int, method: str, *, threads: int = 256, repeat: int | None = None, seed: int = 0) -> Timing:
    """Time SAXPY on ``n`` float32 elements one of the three ways of :data:`SAXPY_METHODS`.

    * ``host: NumPy``: ``a * x + y`` on the CPU, timed with the host clock (:func:`~labhelpers.timing.wall_time`).
    * ``GPU incl. transfers``: the five steps each time: allocate, copy x and y to the device,
      launch, copy the result back (pageable host memory), timed with CUDA events.
    * ``GPU kernel only``: x, y and out already on the device; only the launch is timed.

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
    timing = benchmark(work, repeat=repeat, nbytes=nbytes, flops=flops, label=f"SAXPY n={n}, {method}")
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
    median_ms = pd.to_numeric(at_n["median_ms"], errors="coerce").astype(float)  # JSON nulls become NaN
    gbps = pd.to_numeric(at_n["gbps"], errors="coerce").astype(float)
    kernel_ms = median_ms.get(GPU_KERNEL_ONLY, np.nan)
    summary = pd.DataFrame({
        "median_ms": median_ms,
        "GB/s (12n bytes / time)": gbps,
        "x slower than kernel only": median_ms / kernel_ms,
    })
    summary.index.name = f"SAXPY, n = 2^{int(np.log2(n))}" if n & (n - 1) == 0 else f"SAXPY, n = {n}"
    return summary.round(3)


def plot_saxpy_three_ways(reference, live: pd.DataFrame | None = None):
    """Time and GB/s of the three SAXPY ways against n, log-log: reference dashed, this machine's sweep solid.

    Args:
        reference: the reference data ``ch01_saxpy_three_ways`` (:func:`~labhelpers.refdata.load_reference`).
        live: a :func:`saxpy_three_ways` table measured here, or None (the simulator has no timings).

    Returns:
        The matplotlib figure.
    """
    import matplotlib.pyplot as plt

    from ..plotting import plot_comparison

    tables = [reference.table] + ([live] if live is not None else [])
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.2))
    for ax, column, ylabel in ((axes[0], "median_ms", "time per SAXPY (ms)"),
                               (axes[1], "gbps", "GB/s  (12 n bytes / time)")):
        has_data = any(pd.to_numeric(t[column], errors="coerce").gt(0).any() for t in tables)
        plot_comparison(x="n", y=column, group="method", live=live, reference=reference, ax=ax,
                        logx=True, logy=has_data, xlabel="n (float32 elements)", ylabel=ylabel)
        if not has_data:
            ax.text(0.5, 0.5, "no timings in this reference data", transform=ax.transAxes, ha="center", color="0.4")
    handles, labels = axes[1].get_legend_handles_labels()
    for ax in axes:
        if ax.get_legend() is not None:
            ax.get_legend().remove()
    fig.suptitle(f"SAXPY three ways. {reference.provenance}", fontsize=9)
    fig.tight_layout(rect=(0, 0.1 if live is None else 0.16, 1, 1))
    if handles:
        fig.legend(handles, labels, loc="lower center", ncol=1 if live is None else 2, fontsize=8, frameon=False)
    return fig
