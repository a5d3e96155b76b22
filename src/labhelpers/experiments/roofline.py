"""Chapter "Profiling and the roofline": the measurements the chapter shows, and the tables it plots.

:func:`timing_hygiene` (what each way of timing a launch really measures), :func:`timing_repeats` (noise),
:func:`intensity_sweep` (a kernel walking along the roof), :func:`skewed_gemm_sweep` (same flops, falling
speed), :func:`representative_points` (a few kernels for the roofline plot), :func:`fft_crossover` (from
which size ``cupy.fft`` beats ``numpy.fft``) and :func:`sanitizer_table` (what ``compute-sanitizer`` reports on
the chapter's two bugs). :func:`library_comparison` reads the book's reference data for where a library call
beats hand-written code and where it does not. ``bench/roofline.py`` stores
their tables as reference data ``ch07_*``; the chapter shows them through
:func:`labhelpers.measured.live_or_reference`. On a GPU they time; under the simulator the sweeps return the
same columns with NaN timings, and the functions that exist only to time raise
:class:`~labhelpers.errors.GPUOnlyError`.

The kernels are in :mod:`labhelpers.kernels.roofline`; the ceilings are measured by
:mod:`labhelpers.roofline.measure`.
"""

from __future__ import annotations

import time

import numpy as np
import pandas as pd
from numba import cuda

from .. import backend, profiler
from ..counts import saxpy_bytes, saxpy_flops
from ..kernels.cuda_intro import saxpy
from ..kernels.roofline import (
    fma_chains,
    fma_chains_flops,
    fma_per_element,
    fma_per_element_bytes,
    fma_per_element_flops,
    fma_per_element_intensity,
    full_grid,
)
from ..launch import blocks_for
from ..roofline.model import gemm_intensity
from ..roofline.ceilings import Ceilings
from ..refdata import load_reference
from ..roofline.points import check_against_ceilings, record_point
from ..sizes import fp64_problem_size
from ..sweep import sweep
from ..timing import Timing, benchmark, wall_time
from ..xp import HAS_CUPY


# The one guard, under the name chapter 7 shows in timing_hygiene's source (lh.show_source).
_require_gpu = backend.require_gpu


def timing_hygiene(n: int = 2**26, nfma: int = 256) -> pd.DataFrame:
    """Time one launch of :func:`~labhelpers.kernels.roofline.fma_per_element` four ways; say what each measures.

    1. The first call of a freshly compiled kernel, host clock, synchronised: compilation included.
    2. A later call, host clock, *not* synchronised: only the launch (the kernel is still running).
    3. The same, synchronised before stopping the clock: the launch, the kernel, the synchronisation.
    4. CUDA events around the launch (median of 20, after warm-up): the GPU's own time for the kernel.

    Returns:
        A table with columns ``measurement``, ``ms`` and ``what_it_measures``.

    Raises:
        GPUOnlyError: under the simulator.
    """
    _require_gpu("timing_hygiene")
    x = cuda.to_device(np.ones(n, dtype=np.float32))
    out = cuda.device_array(n, dtype=np.float32)
    blocks, threads = full_grid()
    fresh = cuda.jit(fma_per_element.py_func)  # a new dispatcher: its first call compiles
    a, b = np.float32(0.999), np.float32(0.001)

    def launch(kernel=fresh):
        kernel[blocks, threads](x, out, nfma, a, b)

    cuda.synchronize()
    t0 = time.perf_counter()
    launch()
    cuda.synchronize()
    first_ms = (time.perf_counter() - t0) * 1e3

    for _ in range(3):  # warm-up: caches, clocks, the launch path
        launch()
    cuda.synchronize()
    t0 = time.perf_counter()
    launch()
    unsync_ms = (time.perf_counter() - t0) * 1e3
    cuda.synchronize()

    t0 = time.perf_counter()
    launch()
    cuda.synchronize()
    sync_ms = (time.perf_counter() - t0) * 1e3

    events = benchmark(launch, repeat=20, warmup=2, label="fma_per_element")
    rows = [
        ("first call (host clock, synchronised)", first_ms, "compilation + launch + kernel"),
        ("later call, no synchronisation (host clock)", unsync_ms, "the launch only: the kernel is still running"),
        ("later call, synchronised (host clock)", sync_ms, "launch + kernel + synchronisation"),
        ("CUDA events, median of 20", events.median_ms, "the kernel, on the GPU's clock"),
    ]
    return pd.DataFrame(rows, columns=["measurement", "ms", "what_it_measures"])


def timing_repeats(n: int = 2**26, nfma: int = 256, repeat: int = 50) -> pd.DataFrame:
    """Time the same launch ``repeat`` times with CUDA events and with a synchronised host clock.

    The events are :func:`~labhelpers.timing.benchmark`'s (GPU time, the stream held); the host clock is
    :func:`~labhelpers.timing.wall_time` around a launch and ``cuda.synchronize()``. Row ``rep`` pairs the
    ``rep``-th repetition of each.

    Returns:
        A table with columns ``rep``, ``event_ms`` and ``host_ms`` (one row per repetition).

    Raises:
        GPUOnlyError: under the simulator.
    """
    _require_gpu("timing_repeats")
    x = cuda.to_device(np.ones(n, dtype=np.float32))
    out = cuda.device_array(n, dtype=np.float32)
    blocks, threads = full_grid()
    a, b = np.float32(0.999), np.float32(0.001)

    def launch():
        fma_per_element[blocks, threads](x, out, nfma, a, b)

    def launch_and_wait():
        launch()
        cuda.synchronize()

    events = benchmark(launch, warmup=3, repeat=repeat, label="fma_per_element").times_ms
    host = wall_time(launch_and_wait, warmup=1, repeat=repeat, label="fma_per_element, host clock").times_ms
    return pd.DataFrame({"rep": range(repeat), "event_ms": events, "host_ms": host})


def repeats_summary(repeats: pd.DataFrame) -> pd.DataFrame:
    """Median, minimum and spread (interquartile range over median) of :func:`timing_repeats`' two clocks.

    Returns:
        One row per clock (``CUDA events``, ``host clock, synchronised``), columns ``median ms``, ``min ms`` and
        ``spread (IQR / median)``.
    """
    rows = {}
    for clock, column in (("CUDA events", "event_ms"), ("host clock, synchronised", "host_ms")):
        ms = pd.to_numeric(repeats[column])
        q1, median, q3 = ms.quantile([0.25, 0.5, 0.75])
        rows[clock] = {"median ms": median, "min ms": ms.min(), "spread (IQR / median)": (q3 - q1) / median}
    return pd.DataFrame.from_dict(rows, orient="index")


#: The FMA counts per element of the chapter's intensity sweep (intensity nfma/4 FLOP/B in FP32).
SWEEP_NFMA = (1, 2, 4, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256, 512, 1024)


def intensity_sweep(nfma_values=SWEEP_NFMA, n: int = 2**26, progress: bool = True) -> pd.DataFrame:
    """Time ``fma_per_element`` (float32) for each FMA count: the kernel walking along the roofline.

    Returns:
        The :func:`~labhelpers.sweep.sweep` table with ``nfma`` and ``intensity`` (FLOP/byte) first; NaN
        timings under the simulator, where nothing is launched.
    """
    state = {}

    def run(nfma):
        if backend.is_simulator():
            return None
        if "x" not in state:
            state["x"] = cuda.to_device(np.full(n, 0.5, dtype=np.float32))
            state["out"] = cuda.device_array(n, dtype=np.float32)
            state["grid"] = full_grid()
        x, out = state["x"], state["out"]
        blocks, threads = state["grid"]
        a, b = np.float32(0.999), np.float32(0.001)
        return benchmark(lambda: fma_per_element[blocks, threads](x, out, nfma, a, b),
                         flops=fma_per_element_flops(n, nfma), nbytes=fma_per_element_bytes(n, 4),
                         repeat=10, number=3, label=f"fma_per_element nfma={nfma}")

    table = sweep(run, {"nfma": list(nfma_values)}, progress=progress, desc="intensity sweep")
    table.insert(1, "intensity", [fma_per_element_intensity(v, 4) for v in table["nfma"]])
    return table


def skewed_shapes(base: int = 1024, k: int = 1024, steps: int = 11) -> list[tuple[int, int, int]]:
    """The skewed GEMM shapes ``(m, n, k)``: ``m = base * 2^i``, ``n = base / 2^i``, so ``m * n`` stays fixed."""
    shapes = []
    for i in range(steps):
        f = 2**i
        if base % f:
            break
        shapes.append((base * f, base // f, k))
    return shapes


def skewed_shapes_table(base: int = 1024, k: int = 1024, steps: int = 11) -> pd.DataFrame:
    """The skewed shapes with their algorithmic intensity (FLOP/byte, float32): columns ``m``, ``n``, ``k``,
    ``intensity``."""
    shapes = skewed_shapes(base, k, steps)
    table = pd.DataFrame(shapes, columns=["m", "n", "k"])
    table["intensity"] = [gemm_intensity(m, n, kk) for m, n, kk in shapes]
    return table


def skewed_gemm_sweep(base: int = 1024, k: int = 1024, steps: int = 11, progress: bool = True) -> pd.DataFrame:
    """Time CuPy's float32 matmul on shapes that keep ``m * n`` and ``k`` fixed (the same flops each).

    Returns:
        A sweep table with ``shape`` (``"m-n-k"``), ``m``, ``n``, ``k``, ``flops`` and ``intensity``, then the
        timing columns (NaN under the simulator: nothing is multiplied then).

    Raises:
        GPUOnlyError: on a GPU without CuPy.
    """
    if backend.is_gpu():
        _require_gpu("skewed_gemm_sweep", needs_cupy=True, instead="The skewed GEMM sweep times cupy.matmul.")

    def run(shape):
        if not HAS_CUPY:
            return None
        import cupy as cp  # the optional GPU extra: imported only when there is one

        cp.get_default_memory_pool().free_all_blocks()  # the previous shape's matrices
        m, n, kk = (int(v) for v in shape.split("-"))
        rng = cp.random.default_rng(4)
        a = rng.random((m, kk), dtype=cp.float32)
        b = rng.random((kk, n), dtype=cp.float32)
        c = cp.empty((m, n), dtype=cp.float32)
        return benchmark(lambda: cp.matmul(a, b, out=c), flops=2 * m * n * kk,
                         nbytes=4 * (m * kk + kk * n + m * n), repeat=10, number=5, label=f"matmul {shape}")

    shapes = skewed_shapes(base, k, steps)
    labels = [f"{m}-{n}-{kk}" for m, n, kk in shapes]
    table = sweep(run, {"shape": labels}, progress=progress, desc="skewed GEMM")
    table.insert(1, "m", [s[0] for s in shapes])
    table.insert(2, "n", [s[1] for s in shapes])
    table.insert(3, "k", [s[2] for s in shapes])
    table.insert(4, "flops", [2 * m * n * kk for m, n, kk in shapes])
    table.insert(5, "intensity", [gemm_intensity(m, n, kk) for m, n, kk in shapes])
    return table


def _point(name: str, timing: Timing, flops: int, nbytes: int, precision: str = "fp32",
           tensor_cores: bool = False) -> dict:
    return {"name": name, "chapter": "07", "precision": precision, "flops": flops, "nbytes": nbytes,
            "median_ms": timing.median_ms, "gflops": timing.gflops, "gbps": timing.gbps,
            "intensity": flops / nbytes, "tensor_cores": tensor_cores, "timing": timing}


def representative_points(n: int = 2**26, record: bool = False, ceilings: Ceilings | None = None) -> pd.DataFrame:
    """Measure a few typical kernels for the roofline plot: streaming, FMA-heavy, reductions and matmuls.

    Every result is checked against its expected value before it counts. With ``record=True`` each is also
    added to this GPU's roofline (:func:`labhelpers.roofline.record_point`, which refuses impossible ones);
    with ``ceilings`` (measured in the same run), each is checked against them
    (:func:`labhelpers.roofline.check_against_ceilings`).

    Returns:
        A table with columns ``name``, ``chapter``, ``precision``, ``flops``, ``nbytes``, ``median_ms``, ``gflops``,
        ``gbps``, ``intensity`` (flops over the bytes the kernel must move: its algorithmic intensity).

    Raises:
        GPUOnlyError: under the simulator.
        ImpossibleMeasurement: a point above a ceiling measured on this GPU.
    """
    _require_gpu("representative_points")
    rows = []
    blocks, threads = full_grid()
    x = cuda.to_device(np.full(n, 0.5, dtype=np.float32))
    y = cuda.to_device(np.full(n, 0.25, dtype=np.float32))
    out = cuda.device_array(n, dtype=np.float32)
    one_per_thread = blocks_for(n, 256)
    t = benchmark(lambda: saxpy[one_per_thread, 256](np.float32(2.0), x, y, out),
                  flops=saxpy_flops(n), nbytes=saxpy_bytes(n), number=3, label="saxpy")
    _expect(out.copy_to_host(), 1.25, "SAXPY")
    rows.append(_point("SAXPY (chapter 1 kernel)", t, saxpy_flops(n), saxpy_bytes(n)))
    a, b = np.float32(0.999), np.float32(0.001)
    for nfma in (4, 64):
        flops, nbytes = fma_per_element_flops(n, nfma), fma_per_element_bytes(n, 4)
        t = benchmark(lambda: fma_per_element[blocks, threads](x, out, nfma, a, b), flops=flops, nbytes=nbytes,
                      number=3, label=f"fma_per_element {nfma}")
        expected = 0.5
        for _ in range(nfma):
            expected = np.float32(expected) * a + b
        _expect(out.copy_to_host()[:: max(1, n // 1024)], float(expected), f"fma_per_element {nfma}", rtol=1e-4)
        rows.append(_point(f"fma_per_element, {nfma} FMA/element", t, flops, nbytes))
    total = blocks * threads
    for dtype, iters in ((np.float32, 2048), (np.float64, 512)):
        start = cuda.to_device(np.ones(total, dtype=dtype))
        flops, nbytes = fma_chains_flops(total, iters), 2 * total * np.dtype(dtype).itemsize
        t = benchmark(lambda: fma_chains[blocks, threads](start, iters, dtype(0.999), dtype(0.001)),
                      flops=flops, nbytes=nbytes, label=f"fma_chains {np.dtype(dtype).name}")
        fp = "fp32" if dtype is np.float32 else "fp64"
        rows.append(_point(f"fma_chains ({fp.upper()})", t, flops, nbytes, fp))
    if HAS_CUPY:
        import cupy as cp  # the optional GPU extra: imported only when there is one

        xs = cp.full(n, 0.5, dtype=cp.float32)
        t = benchmark(lambda: cp.sum(xs), flops=n, nbytes=4 * n, number=3, label="cupy.sum")
        _expect(np.array([float(cp.sum(xs))]), 0.5 * n, "cupy.sum", rtol=1e-3)
        rows.append(_point("cupy.sum (reduction)", t, n, 4 * n))
        # float64 at 4096 takes half a second per product on a T4 (1/32 FP64): smaller there, same time as elsewhere
        fp64_size = fp64_problem_size(gpu=4096, sim=256, power=3, multiple=256)
        for dtype, size in ((cp.float32, 4096), (cp.float64, fp64_size)):
            am = cp.full((size, size), 0.5, dtype=dtype)
            bm = cp.full((size, size), 0.25, dtype=dtype)
            cm = cp.empty((size, size), dtype=dtype)
            flops, nbytes = 2 * size**3, 3 * size * size * np.dtype(dtype).itemsize
            t = benchmark(lambda: cp.matmul(am, bm, out=cm), flops=flops, nbytes=nbytes, number=3,
                          label=f"cupy.matmul {np.dtype(dtype).name}")
            _expect(cp.asnumpy(cm[:4, :4]).ravel(), 0.125 * size, f"cupy.matmul {np.dtype(dtype).name}", rtol=1e-3)
            fp = "fp32" if dtype is cp.float32 else "fp64"
            rows.append(_point(f"cupy.matmul {size}x{size} ({fp.upper()})", t, flops, nbytes, fp, tensor_cores=True))
    for row in rows if ceilings is not None else ():
        check_against_ceilings(f"representative_points: {row['name']}", gflops=row["gflops"], gbps=row["gbps"],
                               ceilings=ceilings, precision=row["precision"], tensor_cores=row["tensor_cores"])
    if record:
        for row in rows:
            record_point(row["name"], row["flops"], row["nbytes"], row["timing"], chapter=row["chapter"],
                         precision=row["precision"], tensor_cores=row["tensor_cores"])
    return pd.DataFrame(rows).drop(columns=["timing", "tensor_cores"])


def _expect(got: np.ndarray, want: float, what: str, rtol: float = 1e-6) -> None:
    """Raise unless every value of ``got`` is ``want``: a wrong kernel's time is not a point on the roofline."""
    if not np.allclose(got, want, rtol=rtol):
        raise AssertionError(f"{what} computed {got[:4]}..., expected {want}: its time is not recorded")


# ------------------------------------------------------------------------------------ library or not

#: Vector lengths :func:`fft_crossover` tries: 16 to 4M points.
FFT_SIZES = tuple(2**k for k in range(4, 23))
#: The crossover the CUDA lecture slides quote for CUFFT against FFTW (Rossbach, CS378).
LECTURE_FFT_CROSSOVER = 8192


def _cpu_ms(fn, repeat: int = 7, min_ms: float = 2.0) -> float:
    """Median time of one call of ``fn`` on the host clock, calls batched to at least ``min_ms`` per timing."""
    fn()
    number, t0 = 1, time.perf_counter()
    fn()
    once = max((time.perf_counter() - t0) * 1e3, 1e-4)
    number = max(1, int(min_ms / once))
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        for _ in range(number):
            fn()
        times.append((time.perf_counter() - t0) * 1e3 / number)
    return float(np.median(times))


def fft_crossover(sizes=FFT_SIZES, repeat: int = 7) -> pd.DataFrame:
    """``numpy.fft.fft`` on the CPU against ``cupy.fft.fft`` (cuFFT) on this GPU, complex64, one vector per size.

    Three times per size ``n``: ``numpy_ms`` (NumPy's pocketfft, one CPU core, host clock), ``cupy_ms`` (the data
    already on the GPU: CUDA events, the cuFFT plan cached by the warm-up call) and ``cupy_copies_ms`` (the
    data on the host before and after: copy in, FFT, copy out, host clock, as a program that calls the GPU for
    one FFT pays). ``speedup`` and ``speedup_copies`` are NumPy's time over each. Each result is checked against
    NumPy's. GPU only (CuPy needed).
    """
    _require_gpu("fft_crossover", needs_cupy=True, instead="It compares with cupy.fft.")
    import cupy as cp  # the optional GPU extra: imported only when there is one

    rng = np.random.default_rng(0)
    rows = []
    for n in sizes:
        h = (rng.standard_normal(n) + 1j * rng.standard_normal(n)).astype(np.complex64)
        d = cp.asarray(h)
        want = np.fft.fft(h)
        got = cp.asnumpy(cp.fft.fft(d))
        if want.dtype != np.complex64 or not np.allclose(got, want, rtol=1e-3, atol=1e-3 * np.abs(want).max()):
            raise AssertionError(f"cupy.fft.fft and numpy.fft.fft disagree at n={n} (or NumPy did not stay in "
                                 f"complex64: {want.dtype})")
        numpy_ms = _cpu_ms(lambda: np.fft.fft(h), repeat)
        on_gpu = benchmark(lambda: cp.fft.fft(d), repeat=repeat * 3, number=max(1, min(100, 2**16 // n)),
                           label=f"cupy.fft.fft {n}")

        def with_copies():
            cp.asnumpy(cp.fft.fft(cp.asarray(h)))  # asnumpy waits for the GPU

        copies_ms = _cpu_ms(with_copies, repeat)
        rows.append({"n": n, "numpy_ms": numpy_ms, "cupy_ms": on_gpu.median_ms, "cupy_copies_ms": copies_ms,
                     "speedup": numpy_ms / on_gpu.median_ms, "speedup_copies": numpy_ms / copies_ms})
    return pd.DataFrame(rows)


def fft_crossover_points(table: pd.DataFrame) -> dict[str, float]:
    """From which length on the GPU is faster and stays faster: ``on_gpu`` (data already there) and
    ``with_copies`` (data on the host); NaN if it never is within the table."""
    out = {}
    for key, column in (("on_gpu", "cupy_ms"), ("with_copies", "cupy_copies_ms")):
        rows = table.sort_values("n")
        faster = (rows[column] < rows["numpy_ms"]).to_numpy()
        n = rows["n"].to_numpy()
        point = float("nan")
        for i in range(len(n)):
            if faster[i:].all():
                point = float(n[i])
                break
        out[key] = point
    return out


def library_comparison() -> pd.DataFrame:
    """Where the book's hand-written kernels meet a library doing the same job, from the reference data.

    One row per task: the best hand-written kernel, the library call, each one's rate (GB/s or GFLOP/s, on the
    reference GPU) and ``hand-written / library``. The sum and the copy come from chapters 6 and 7, the matrix
    multiply from chapter 5 (at the smallest and the largest size measured).
    """
    rows = []
    flight = load_reference("ch06_loads_in_flight").table
    sweep = load_reference("ch06_reduction_sweep").table
    cub = sweep.loc[sweep["variant"] == "cupy_sum", "gbps"].max()
    rows.append({"task": "sum of 2^26 float32", "hand-written": "chapter 6's best kernel", "library": "cupy.sum (CUB)",
                 "unit": "GB/s", "hand-written rate": flight["gbps"].max(), "library rate": cub})
    copies = load_reference("ch07_copy_variants").table
    lib = copies["kernel"].str.contains("library")
    rows.append({"task": "copy of 1 GiB", "hand-written": "stream_copy16 (chapter 7)",
                 "library": "CuPy dst[:] = src", "unit": "GB/s", "hand-written rate": copies.loc[~lib, "gbps"].max(),
                 "library rate": copies.loc[lib, "gbps"].max()})
    mm = load_reference("ch05_matmul_sweep").table
    ours = mm[~mm["kernel"].str.startswith("cublas")]
    for n in (int(mm["n"].min()), int(mm["n"].max())):
        at = ours[ours["n"] == n]
        best = at.loc[at["gflops"].idxmax()]
        lib_rate = mm.loc[(mm["kernel"] == "cublas_fp32") & (mm["n"] == n), "gflops"].max()
        rows.append({"task": f"FP32 matrix multiply {n}x{n}", "hand-written": f"chapter 5's {best['kernel']}",
                     "library": "cupy.matmul (cuBLAS)", "unit": "GFLOP/s", "hand-written rate": best["gflops"],
                     "library rate": lib_rate})
    table = pd.DataFrame(rows)
    table["hand-written / library"] = table["hand-written rate"] / table["library rate"]
    return table


# ------------------------------------------------------------------------------------ compute-sanitizer


def sanitizer_table(kernels=("scale_unguarded", "scale", "reverse_in_block_no_barrier", "reverse_in_block"),
                    timeout: int = 240) -> pd.DataFrame:
    """What ``compute-sanitizer`` prints for one launch of each kernel (memcheck or racecheck, as fits the bug).

    One row per line: ``tool``, ``kernel``, ``line_no``, ``line``, ``returncode``
    (:func:`labhelpers.profiler.sanitizer_report`). GPU only, and the CUDA toolkit's compute-sanitizer.
    """
    _require_gpu("sanitizer_table")
    return pd.concat([profiler.sanitizer_report(k, timeout=timeout) for k in kernels], ignore_index=True)

