"""Measuring this GPU's ceilings, in the spirit of the Empirical Roofline Toolkit (Lo et al., PMBS 2014).

:func:`measure_ceilings` times the microbenchmarks of :mod:`labhelpers.kernels.roofline` (device-memory and
L2 bandwidth, FP32 and FP64 FMA peaks), with a progress bar, and caches the result per device
(:func:`~labhelpers.roofline.ceilings.load_cached_ceilings`), so every chapter reuses it;
:func:`ceilings_or_reference` gives this GPU's ceilings, or the reference GPU's without one.

**The copy ceiling** is measured here and only here, by :func:`measure_dram_bandwidth` (every copy timed
through :func:`time_copy`): the fastest device-to-device copy of a 1 GiB buffer among the streaming copies
of :data:`COPY_VARIANTS` and, where CuPy is installed, CuPy's own copy; bytes counted read + written. It is
the roofline's device-memory ceiling and the yardstick of every chapter's benchmark
(``bench/common.py``: ``Context.copy_bandwidth_gbs``).

**The host copy ceiling** (the CPU's memory ceiling, the yardstick of the CPU baselines) is measured here too,
by :func:`measure_host_bandwidth`: a STREAM-style copy of a buffer far larger than the CPU's caches, by all of
Numba's threads (:func:`labhelpers.kernels.roofline.host_copy`) and by NumPy (one thread), host clock. It runs
on any machine.

**A kernel's point** on this GPU's roofline is measured by :func:`measure_point` (time a checked launch, then
record it through :func:`~labhelpers.roofline.points.record_point`): chapters and labs measure their points
through it or record a timing they already have with ``record_point``.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import math
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np
from numba import cuda
from tqdm.auto import tqdm

from .. import backend, device, host, timing, validate
from ..kernels import roofline as rk
from ..launch import blocks_for
from ..measured import SOURCE_PREFIX, live_or_reference
from ..sweep import progress_wanted
from ..xp import HAS_CUPY
from .cache import CEILINGS_FILE, device_cache_dir
from .points import record_point
from .ceilings import (
    LIBRARY,
    LIBRARY_COPY_NAME,
    REF_CEILINGS,
    Ceilings,
    ceilings_from_table,
    fp32_peak_at_clock,
    fp64_peak_at_clock,
    load_cached_ceilings,
    save_cached_ceilings,
)


@dataclass(frozen=True)
class CeilingMeasurement:
    """One measured ceiling: the best value over the configurations tried, and which one gave it."""

    value: float
    unit: str
    how: str
    tried: tuple = ()


_MEASURES = "measures this machine's GPU (the simulator's speed says nothing about a GPU)"
_USE_REFERENCE = ("Use labhelpers.roofline.reference_ceilings() for the ceilings measured on the reference GPU, "
                  "or datasheet_ceilings('H100 SXM') for a datasheet.")


def _free_bytes() -> int:
    try:
        free, _total = cuda.current_context().get_memory_info()
        return int(free)
    except Exception:  # a driver that cannot say: assume 4 GiB free
        return 2**32


# -------------------------------------------------------------------------------------- the copy ceiling

#: Bytes of the buffer every copy of the copy ceiling copies: 1 GiB (far larger than any L2 cache), or a
#: quarter of the GPU's free memory if that is less.
COPY_BYTES = 2**30
#: The streaming copies :func:`measure_dram_bandwidth` tries: ``(kernel, element dtype, threads per block,
#: grid)``. ``"one wave"``: just enough blocks to fill every SM once, each thread looping over the array with
#: four loads in flight (a grid-stride loop); ``"one element per thread"``: one block per ``threads``
#: elements, the shape of a library's element-wise kernel. The element size is the width of every load and
#: store.
COPY_VARIANTS: tuple[tuple[str, str, int, str], ...] = (
    ("stream_copy", "float32", 256, "one element per thread"),
    ("stream_copy", "float32", 256, "one wave"),
    ("stream_copy", "float64", 256, "one wave"),
    ("stream_copy16", "complex128", 256, "one wave"),
    ("stream_copy16", "complex128", 512, "one wave"),
    ("stream_copy16", "complex128", 1024, "one wave"),
    ("stream_copy16", "complex128", 256, "one element per thread"),
)
_COPY_KERNELS = {"stream_copy": rk.stream_copy, "stream_copy16": rk.stream_copy16}


def _numba_array(a):
    """``a`` as a Numba device array (a CuPy array is wrapped, not copied)."""
    return a if hasattr(a, "copy_to_host") else cuda.as_cuda_array(a)


def time_copy(src, out=None, *, kernel: str = LIBRARY, dtype=None, threads: int = 256, grid: str = "one wave",
              warmup: int = 2, repeat: int = 10, number: int = 5) -> timing.Timing:
    """Time one device-to-device copy of ``src`` with CUDA events: the one way labhelpers times a copy.

    Args:
        src: a device array (Numba or CuPy); its bytes are copied, whatever they hold.
        out: where to copy to (a device array of the same size in bytes); a new one when omitted.
        kernel: ``"library"`` (CuPy's ``dst[:] = src``), ``"stream_copy"`` or ``"stream_copy16"``
            (:mod:`labhelpers.kernels.roofline`'s streaming copies).
        dtype: the element type the buffers are viewed as, i.e. the width of each access (default:
            ``src``'s own; ``complex128`` for ``stream_copy16``).
        threads, grid: the launch of a streaming copy (``"one wave"`` or ``"one element per thread"``).
        warmup, repeat, number: as :func:`~labhelpers.timing.benchmark` (``number`` copies between two events).

    Returns:
        The :class:`~labhelpers.timing.Timing`, with ``nbytes`` = bytes read + written (twice ``src``'s size).
    """
    if kernel not in (LIBRARY, *_COPY_KERNELS):
        raise ValueError(f"kernel must be {LIBRARY!r} or one of {sorted(_COPY_KERNELS)}, got {kernel!r}")
    nbytes = int(src.nbytes)
    if kernel == LIBRARY:
        backend.require_gpu("the library copy", because="is CuPy's copy on the GPU", needs_cupy=True,
                            instead="Time one of the Numba copy kernels instead (kernel='stream_copy', for one).")
        import cupy as cp  # the optional GPU extra: imported only when a library copy is timed

        x = cp.asarray(src).reshape(-1).view(dtype or src.dtype)
        y = cp.empty_like(x) if out is None else cp.asarray(out).reshape(-1).view(x.dtype)

        def copy():
            y[:] = x

        label = LIBRARY_COPY_NAME
    else:
        dtype = np.dtype(dtype or (np.complex128 if kernel == "stream_copy16" else src.dtype))
        if nbytes % dtype.itemsize:
            raise ValueError(f"{kernel} copies {dtype.itemsize}-byte elements, and {nbytes} bytes are not a whole "
                             f"number of them: copy a buffer whose size is a multiple of {dtype.itemsize}")
        x = _numba_array(src).view(dtype)
        y = cuda.device_array_like(x) if out is None else _numba_array(out).view(dtype)
        blocks = rk.full_grid(threads)[0] if grid == "one wave" else blocks_for(x.shape[0], threads)
        launch = _COPY_KERNELS[kernel][blocks, threads]

        def copy():
            launch(x, y)

        label = f"{kernel}, {dtype.itemsize}-byte accesses, {grid}: {blocks} blocks x {threads} threads"
    return timing.benchmark(copy, nbytes=2 * nbytes, warmup=warmup, repeat=repeat, number=number, label=label)


def measure_dram_bandwidth(nbytes: int = COPY_BYTES, variants: Sequence[tuple[str, str, int, str]] = COPY_VARIANTS,
                           *, library: bool = True) -> CeilingMeasurement:
    """The copy ceiling, this GPU's device-memory (DRAM/HBM) ceiling: the fastest of several copies.

    Definition: the best bandwidth of a device-to-device copy of one ``nbytes`` buffer (1 GiB, or a quarter of
    the free memory if less; rounded down to whole 16-byte elements) into another, among the streaming copies
    of :data:`COPY_VARIANTS` (4-, 8- and 16-byte accesses, two grid shapes) and, where CuPy is installed and
    ``library`` is true, CuPy's ``dst[:] = src``. Bytes are counted read + written (``2 * nbytes`` per copy).
    Each copy is timed by :func:`time_copy`: CUDA events, two warm-up copies, the median of 10 timings of 5
    back-to-back copies.

    Returns:
        The best copy's GB/s; ``tried`` holds one dict per copy (``kernel``, ``access_bytes``, ``threads``,
        ``blocks``, ``grid``, ``gbps``, ``how``; the library's row has no access size, threads or blocks).
    """
    backend.require_gpu("measure_dram_bandwidth", because=_MEASURES, instead=_USE_REFERENCE)
    nbytes = int(min(nbytes, _free_bytes() // 4)) // 16 * 16
    src = cuda.device_array(nbytes // 16, dtype=np.complex128)
    dst = cuda.device_array(nbytes // 16, dtype=np.complex128)
    size = f"{nbytes / 2**20:,.0f} MiB copied"
    tried = []
    for kernel, dtype, threads, grid in variants:
        itemsize = np.dtype(dtype).itemsize
        blocks = rk.full_grid(threads)[0] if grid == "one wave" else blocks_for(nbytes // itemsize, threads)
        t = time_copy(src, dst, kernel=kernel, dtype=dtype, threads=threads, grid=grid)
        tried.append({"kernel": kernel, "access_bytes": itemsize, "threads": threads, "blocks": blocks,
                      "grid": grid, "gbps": t.gbps, "how": f"{t.label}, {size}"})
    if library and HAS_CUPY:
        t = time_copy(src, dst, kernel=LIBRARY, dtype=np.float32)
        tried.append({"kernel": LIBRARY_COPY_NAME, "access_bytes": None, "threads": None, "blocks": None,
                      "grid": LIBRARY, "gbps": t.gbps, "how": f"{LIBRARY_COPY_NAME}, float32, {size}"})
    best = max(tried, key=lambda row: row["gbps"])
    return CeilingMeasurement(best["gbps"], "GB/s", best["how"], tuple(tried))


# ---------------------------------------------------------------------------------- the host's memory

#: Bytes of each buffer of the host copy ceiling: 512 MiB, far larger than any CPU's last-level cache.
HOST_COPY_BYTES = 2**29
#: The host copies :func:`measure_host_bandwidth` tries: Numba's threads (plain stores: each line written is
#: first read into the cache), NumPy's one-thread copy, and NumPy's copy split over as many Python threads as
#: Numba has (``np.copyto`` releases the GIL, and the C library's ``memcpy`` streams large copies past the cache).
HOST_COPY_VARIANTS: tuple[str, ...] = ("numba_parallel", "numpy", "numpy_threads")


def time_host_copy(src: np.ndarray, out: np.ndarray | None = None, *, kind: str = "numba_parallel",
                   warmup: int = 2, repeat: int = 10) -> timing.Timing:
    """Time one host-to-host copy of ``src`` with the host clock: the one way labhelpers times a CPU copy.

    Args:
        src: a contiguous NumPy array; its bytes are copied.
        out: where to copy to (same shape and dtype); a new array when omitted.
        kind: ``"numba_parallel"`` (:func:`~labhelpers.kernels.roofline.host_copy`, every Numba thread),
            ``"numpy"`` (``np.copyto``, one thread) or ``"numpy_threads"`` (``np.copyto`` of one contiguous
            part per thread, as many threads as Numba's).
        warmup, repeat: copies before timing (the first also compiles Numba's), and copies timed.

    Returns:
        The :class:`~labhelpers.timing.Timing` (median of ``repeat`` copies), ``nbytes`` = bytes read + written.
    """
    validate.choice(kind, "kind", HOST_COPY_VARIANTS)
    validate.array(src, "src", ndim=1)
    out = np.empty_like(src) if out is None else out
    validate.array(out, "out", dtype=src.dtype, shape=tuple(src.shape))
    if kind == "numba_parallel":
        def copy():
            rk.host_copy(src, out)

        label = f"host copy, Numba prange ({host.host_cpu().numba_threads} threads)"
    elif kind == "numpy_threads":
        threads = host.host_cpu().numba_threads
        bounds = np.linspace(0, src.shape[0], threads + 1).astype(np.int64)
        parts = [(out[a:b], src[a:b]) for a, b in zip(bounds[:-1], bounds[1:])]
        pool = ThreadPoolExecutor(max_workers=threads)

        def copy():
            list(pool.map(lambda part: np.copyto(*part), parts))

        label = f"host copy, np.copyto in {threads} threads"
        try:
            return timing.wall_time(copy, warmup=warmup, repeat=repeat, nbytes=2 * int(src.nbytes), label=label)
        finally:
            pool.shutdown()
    else:
        def copy():
            np.copyto(out, src)

        label = "host copy, np.copyto (one thread)"
    return timing.wall_time(copy, warmup=warmup, repeat=repeat, nbytes=2 * int(src.nbytes), label=label)


def measure_host_bandwidth(nbytes: int = HOST_COPY_BYTES, variants: Sequence[str] = HOST_COPY_VARIANTS,
                           *, repeat: int = 10) -> CeilingMeasurement:
    """The host copy ceiling, this CPU's memory ceiling: the fastest STREAM-style copy. Any machine.

    Definition: the best bandwidth of a copy of one ``nbytes`` buffer (512 MiB: beyond any last-level cache)
    of float64 into another, host clock, median of ``repeat`` copies after two warm-up copies, bytes counted
    read + written (STREAM's convention: the write-allocate reads a cache makes are not counted), among
    :data:`HOST_COPY_VARIANTS`: every Numba thread (``prange``), NumPy's ``np.copyto`` (one thread) and
    ``np.copyto`` split over as many threads. A kernel that reads the lines it writes (SAXPY's ``y``) pays
    no write-allocate read, so it can exceed a copy that does: a ratio above 1 to this ceiling is possible.

    Returns:
        The best copy's GB/s; ``how`` names it with the CPU and thread count; ``tried`` holds one dict per
        copy (``kernel``, ``threads``, ``gbps``, ``median_ms``, ``how``).
    """
    nbytes = validate.integer(nbytes, "nbytes", minimum=8)
    src = np.ones(nbytes // 8, dtype=np.float64)  # written once, so every page is mapped before timing
    dst = np.zeros_like(src)
    cpu = host.host_cpu()
    size = f"{src.nbytes / 2**20:,.0f} MiB copied"
    tried = []
    for kind in variants:
        t = time_host_copy(src, dst, kind=kind, repeat=repeat)
        threads = 1 if kind == "numpy" else host.host_cpu().numba_threads
        tried.append({"kernel": kind, "threads": threads, "gbps": t.gbps, "median_ms": t.median_ms,
                      "how": f"{t.label}, {size}, {cpu.model}"})
    best = max(tried, key=lambda row: row["gbps"])
    return CeilingMeasurement(best["gbps"], "GB/s", best["how"], tuple(tried))


# ------------------------------------------------------------------------------- L2 and the FMA peaks


def measure_l2_bandwidth(working_set: int | None = None, threads: int = 256,
                         dtypes: Sequence = (np.float32, np.float64)) -> CeilingMeasurement:
    """L2 bandwidth: :func:`~labhelpers.kernels.roofline.l2_read` over a buffer a quarter of the L2's size.

    Counts bytes read (the kernel stores nothing but one sum per thread).
    """
    backend.require_gpu("measure_l2_bandwidth", because=_MEASURES, instead=_USE_REFERENCE)
    if working_set is None:
        l2 = device.device_info().l2_bytes or 2**24
        working_set = 2 ** int(math.floor(math.log2(max(l2 // 4, 2**16))))
    blocks, threads = rk.full_grid(threads)
    total = blocks * threads
    best, tried = None, []
    for dtype in dtypes:
        itemsize = np.dtype(dtype).itemsize
        x = cuda.to_device(np.ones(working_set // itemsize, dtype=dtype))
        out = cuda.device_array(total, dtype=np.float32)
        steps = 4 * max(1, int(8e9 / (total * itemsize)) // 4)  # about 8 GB read per launch
        step = rk.l2_step(total)
        t = timing.benchmark(lambda: rk.l2_read[blocks, threads](x, out, steps, step),
                             nbytes=rk.l2_read_bytes(total, steps, itemsize), warmup=2, repeat=10, number=3,
                             label="l2_read")
        how = (f"l2_read, {np.dtype(dtype).name}, {working_set / 2**20:,.0f} MiB working set, "
               f"{blocks} blocks x {threads} threads")
        tried.append((how, t.gbps))
        if best is None or t.gbps > best[1]:
            best = (how, t.gbps)
    return CeilingMeasurement(best[1], "GB/s", best[0], tuple(tried))


def measure_fma_peak(dtype=np.float32, threads_options: Sequence[int] = (256, 1024),
                     target_ms: float = 5.0) -> CeilingMeasurement:
    """FMA peak: :func:`~labhelpers.kernels.roofline.fma_chains`, eight chains per thread, every SM full."""
    backend.require_gpu("measure_fma_peak", because=_MEASURES, instead=_USE_REFERENCE)
    dtype = np.dtype(dtype).type
    guess = (fp32_peak_at_clock() if dtype is np.float32 else fp64_peak_at_clock()) or 20_000.0
    best, tried = None, []
    for threads in threads_options:
        blocks, threads = rk.full_grid(threads)
        total = blocks * threads
        iters = max(1, int(guess * 1e9 * target_ms * 1e-3 / rk.fma_chains_flops(total, 1)))
        start = cuda.to_device(np.ones(total, dtype=dtype))
        a, b = dtype(0.999), dtype(0.001)
        t = timing.benchmark(lambda: rk.fma_chains[blocks, threads](start, iters, a, b),
                             flops=rk.fma_chains_flops(total, iters), warmup=2, repeat=10, label="fma_chains")
        how = f"fma_chains, {np.dtype(dtype).name}, 8 chains/thread, {blocks} blocks x {threads} threads"
        tried.append((how, t.gflops))
        if best is None or t.gflops > best[1]:
            best = (how, t.gflops)
    return CeilingMeasurement(best[1], "GFLOP/s", best[0], tuple(tried))


# ---------------------------------------------------------------------------------- all four, cached


def measure_ceilings(*, refresh: bool = False, cache: bool = True, progress: bool = True) -> Ceilings:
    """Measure (or read from the cache) the ceilings of the GPU this runs on.

    Args:
        refresh: measure again even if a cached result exists.
        cache: read and write ``<cache_root>/<device>/ceilings.json``.
        progress: show a progress bar.

    Raises:
        GPUOnlyError: under the simulator (use :func:`ceilings_or_reference`).
    """
    backend.require_gpu("measure_ceilings", because=_MEASURES, instead=_USE_REFERENCE)
    info = device.device_info()
    if cache and not refresh:
        cached = load_cached_ceilings(info.name)
        if cached is not None:
            return cached
    steps: list[tuple[str, str, Callable[[], CeilingMeasurement]]] = [
        ("dram_gbs", "device-memory bandwidth", measure_dram_bandwidth),
        ("l2_gbs", "L2 bandwidth", measure_l2_bandwidth),
        ("fp32_gflops", "FP32 FMA peak", lambda: measure_fma_peak(np.float32)),
        ("fp64_gflops", "FP64 FMA peak", lambda: measure_fma_peak(np.float64)),
    ]
    values, how, tried = {}, {}, {}
    with tqdm(total=len(steps), desc="measuring ceilings", disable=not progress_wanted(progress)) as bar:
        for key, label, measure in steps:
            bar.set_postfix_str(label)
            result = measure()
            values[key], how[key] = result.value, result.how
            tried[key] = [row if isinstance(row, dict) else {"how": row[0], "value": row[1]} for row in result.tried]
            bar.update()
    today = _dt.date.today().isoformat()
    ceilings = Ceilings(gpu=info.name, source="measured", label=f"measured on {info.name} ({today})",
                        details={"how": how, "tried": tried, "date": today, "clock_khz": info.clock_khz,
                                 "sm_count": info.sm_count, "compute_capability": info.cc,
                                 "driver": info.driver_version}, **values)
    if cache:
        save_cached_ceilings(ceilings)
    return ceilings


def ceilings_or_reference(*, progress: bool = True) -> Ceilings:
    """This GPU's ceilings (measured once, then cached) on a GPU; without one, the reference GPU's.

    Goes through :func:`labhelpers.measured.live_or_reference`, so ``LABHELPERS_LIVE=0`` asks for the reference
    on a GPU too. The result's ``label`` names the GPU (and the date) the ceilings come from, and
    :meth:`~labhelpers.roofline.ceilings.Ceilings.source_line` says where they come from in one line.
    """
    live: dict[str, Ceilings] = {}

    def measure():
        live["ceilings"] = measure_ceilings(progress=progress)
        return live["ceilings"].as_table()

    m = live_or_reference(measure, REF_CEILINGS)
    if m.is_live:
        c = live["ceilings"]
        where = device_cache_dir(c.gpu) / CEILINGS_FILE
        line = (f"{SOURCE_PREFIX}ceilings measured on this GPU, {c.gpu}, on {c.details.get('date', '?')} "
                f"(cached in {where}).")
    else:
        c = ceilings_from_table(m.table, m.gpu, m.label, details=dict(m.reference.meta))
        line = m.source_line()
    return dataclasses.replace(c, details={**c.details, "source_line": line})


def measure_point(name: str, launch: Callable[[], object], *, flops: float, nbytes: float, chapter: str,
                  source: str = "chapter", precision: str = "fp32", tensor_cores: bool = False, record: bool = True,
                  label: str | None = None, **benchmark_options) -> timing.Timing:
    """Time the launch of a kernel whose result was checked, and put it on this GPU's roofline.

    Call it only after the kernel's check passed: a wrong kernel's time is not a point on the roofline.

    Args:
        name: the point's name on the roofline (see :func:`~labhelpers.roofline.points.record_point`).
        launch: one launch of the kernel, timed by :func:`~labhelpers.timing.benchmark`.
        flops, nbytes: the work of one launch (from :mod:`labhelpers.counts` where it has the kernel).
        chapter, source, precision, tensor_cores: as :func:`~labhelpers.roofline.points.record_point`.
        record: record the point (only a GPU timing is recorded; the simulator's is returned as it is).
        label: the timing's label (default ``name``).
        **benchmark_options: ``number``, ``repeat``, ``warmup`` of :func:`~labhelpers.timing.benchmark`.

    Returns:
        The :class:`~labhelpers.timing.Timing` (no numbers under the simulator).

    Raises:
        ImpossibleMeasurement: a rate above a ceiling measured on this GPU (nothing is recorded).
    """
    measured = timing.benchmark(launch, nbytes=nbytes, flops=flops, label=label or name, **benchmark_options)
    if record and measured.is_gpu_timing:
        record_point(name, flops, nbytes, measured, chapter=chapter, source=source, checked=True,
                     precision=precision, tensor_cores=tensor_cores)
    return measured
