"""Measuring this GPU's ceilings, in the spirit of the Empirical Roofline Toolkit (Lo et al., PMBS 2014).

:func:`measure_ceilings` times the microbenchmarks of :mod:`labhelpers.kernels.roofline` (device-memory and
L2 bandwidth, FP32 and FP64 FMA peaks), with a progress bar, and caches the result per device
(:func:`~labhelpers.roofline.ceilings.load_cached_ceilings`), so every chapter reuses it;
:func:`ceilings_or_reference` gives this GPU's ceilings, or the reference GPU's without one.

**The copy ceiling** is measured here and only here, by :func:`measure_dram_bandwidth` (every copy timed
through :func:`time_copy`): the fastest device-to-device copy of a 1 GiB buffer among the streaming copies
of :data:`COPY_VARIANTS` and, where CuPy is installed, CuPy's own copy; bytes counted read + written. It is
the yardstick of every chapter's benchmark (``bench/common.py``: ``Context.copy_bandwidth_gbs``): targets are
stated as fractions of it.

**The device-memory (DRAM) ceiling**, the roofline's memory roof, is :func:`measure_stream_bandwidth`: the
fastest *streaming kernel* of the same run, the copies above and a read-2-write-1 stream, STREAM's triad
(McCalpin, 1995), here :func:`labhelpers.kernels.cuda_intro.saxpy_vec4` (:data:`TRIAD_VARIANTS`, timed by
:func:`time_triad`). A copy is not the fastest way to move bytes through HBM: on an H200 SAXPY with 16-byte
accesses moves 1.03 times the copy's bytes per second (two reads per write turn the bus around less often
than a copy's one), so a roof drawn at the copy would put a correct kernel above it. Every kernel's point must
lie below this ceiling of the same run; one above it is a bug (:func:`measure_point` refuses it).

**The host memory ceiling** (the CPU's memory roof, the yardstick of the CPU baselines) is measured here too,
by :func:`measure_host_bandwidth`: the fastest of several STREAM-style kernels over buffers far larger than the
CPU's caches, host clock, any machine: copies by all of Numba's threads
(:func:`labhelpers.kernels.roofline.host_copy`), by NumPy (one thread) and by NumPy in as many threads, and an
in-place add ``y += x`` in as many threads, a stream that reads every line it writes (a copy's plain stores
first read each destination line into the cache, traffic its byte count does not include). The buffers are
first written by the threads that stream them, so that each thread's pages sit on its own memory node.

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
from ..kernels.cuda_intro import saxpy_vec4, saxpy_vec4_blocks  # the triad stream of the DRAM ceiling
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
    reference_details,
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


# ---------------------------------------------------------------------------- the DRAM ceiling: the best stream

#: The read-2-write-1 streams :func:`measure_stream_bandwidth` adds to the copies: ``(kernel, threads per
#: block)``, each launched with one group of four float32 per thread. STREAM's triad, ``out = a x + y``, with
#: 16-byte accesses: :func:`labhelpers.kernels.cuda_intro.saxpy_vec4`.
TRIAD_VARIANTS: tuple[tuple[str, int], ...] = (("saxpy_vec4", 256), ("saxpy_vec4", 512))
_TRIAD_KERNELS = {"saxpy_vec4": saxpy_vec4}


def time_triad(x, y, out, *, kernel: str = "saxpy_vec4", threads: int = 256, warmup: int = 2, repeat: int = 10,
               number: int = 5) -> timing.Timing:
    """Time one triad ``out = a * x + y`` over float32 device arrays with CUDA events (as :func:`time_copy`).

    Args:
        x, y, out: equal-length float32 device arrays (Numba or CuPy), each starting on a 16-byte boundary.
        kernel: a key of :data:`TRIAD_VARIANTS`' kernels (``"saxpy_vec4"``).
        threads: threads per block; the grid has one group of four elements per thread.
        warmup, repeat, number: as :func:`~labhelpers.timing.benchmark`.

    Returns:
        The :class:`~labhelpers.timing.Timing`, ``nbytes`` = bytes read + written (three times ``x``'s size).
    """
    validate.choice(kernel, "kernel", list(_TRIAD_KERNELS))
    for name, arr in (("x", x), ("y", y), ("out", out)):
        validate.array(arr, name, dtype=np.float32, ndim=1, shape=tuple(x.shape))
    x, y, out = _numba_array(x), _numba_array(y), _numba_array(out)
    blocks = saxpy_vec4_blocks(int(x.shape[0]), threads)
    launch = _TRIAD_KERNELS[kernel][blocks, threads]
    a = np.float32(1.0)

    def triad():
        launch(a, x, y, out)

    return timing.benchmark(triad, nbytes=3 * int(x.nbytes), warmup=warmup, repeat=repeat, number=number,
                            label=f"triad out = a x + y ({kernel}, 16-byte accesses, one group of 4 per thread): "
                                  f"{blocks} blocks x {threads} threads")


def measure_stream_bandwidth(nbytes: int = COPY_BYTES, *, copy: CeilingMeasurement | None = None,
                             triads: Sequence[tuple[str, int]] = TRIAD_VARIANTS) -> CeilingMeasurement:
    """The device-memory (DRAM) ceiling: the fastest streaming kernel of this run, copies and triads.

    Definition: the best bandwidth among the copies of the copy ceiling (``copy``, measured now by
    :func:`measure_dram_bandwidth` when not given: pass the run's own so that both come from one measurement)
    and the triads of ``triads`` (:func:`time_triad`) over three float32 buffers that together hold as many
    bytes as the copy moves (``2 * nbytes``). Bytes are counted read + written for both. A kernel whose rate
    exceeds this ceiling of the same run has miscounted its bytes or skipped its work.

    Returns:
        The best stream's GB/s; ``tried`` holds the copies' rows (as :func:`measure_dram_bandwidth`) followed
        by one row per triad (``kernel``, ``access_bytes`` 16, ``threads``, ``blocks``, ``grid``, ``gbps``,
        ``how``).
    """
    backend.require_gpu("measure_stream_bandwidth", because=_MEASURES, instead=_USE_REFERENCE)
    copy = copy if copy is not None else measure_dram_bandwidth(nbytes)
    each = int(min(2 * nbytes // 3, _free_bytes() // 6)) // 16 * 4  # float32 elements per buffer, 16-byte multiple
    x = cuda.device_array(each, dtype=np.float32)
    y = cuda.device_array(each, dtype=np.float32)
    out = cuda.device_array(each, dtype=np.float32)
    x.copy_to_device(np.ones(each, dtype=np.float32))  # finite values: the timing is the same, NaNs would be too
    y.copy_to_device(np.ones(each, dtype=np.float32))
    size = f"3 x {4 * each / 2**20:,.0f} MiB streamed"
    tried = list(copy.tried)
    for kernel, threads in triads:
        t = time_triad(x, y, out, kernel=kernel, threads=threads)
        tried.append({"kernel": f"triad ({kernel})", "access_bytes": 16, "threads": threads,
                      "blocks": saxpy_vec4_blocks(each, threads), "grid": "one group of 4 per thread",
                      "gbps": t.gbps, "how": f"{t.label}, {size}"})
    best = max(tried, key=lambda row: row["gbps"])
    return CeilingMeasurement(best["gbps"], "GB/s", best["how"], tuple(tried))


# ---------------------------------------------------------------------------------- the host's memory

#: Bytes of each buffer of the host memory ceiling: 512 MiB, far larger than any CPU's last-level cache.
HOST_COPY_BYTES = 2**29
#: The host copies :func:`time_host_copy` times: Numba's threads (plain stores: each line written is first read
#: into the cache), NumPy's one-thread copy, and NumPy's copy split over as many Python threads as Numba has
#: (``np.copyto`` releases the GIL, and the C library's ``memcpy`` streams large copies past the cache).
HOST_COPY_VARIANTS: tuple[str, ...] = ("numba_parallel", "numpy", "numpy_threads")
#: Every host stream :func:`measure_host_bandwidth` tries: the copies, and ``add_threads``, an in-place
#: ``y += x`` (``np.add(y, x, out=y)``) split over as many Python threads: it reads two arrays and writes one,
#: and every line it writes it has read, so the write-allocate traffic a copy's stores cause (and its byte count
#: leaves out) does not arise. A CPU SAXPY that reads two arrays per one written is compared with this.
HOST_STREAM_VARIANTS: tuple[str, ...] = HOST_COPY_VARIANTS + ("add_threads",)
#: Bytes each kind of host stream moves per byte of ``src``, read + written (STREAM's count).
_HOST_BYTES_PER_BYTE = {"numba_parallel": 2, "numpy": 2, "numpy_threads": 2, "add_threads": 3}


def _thread_parts(n: int, threads: int) -> list[tuple[int, int]]:
    """``threads`` contiguous ``(start, stop)`` parts of ``range(n)``, in order, as ``prange`` splits it."""
    bounds = np.linspace(0, n, threads + 1).astype(np.int64)
    return [(int(a), int(b)) for a, b in zip(bounds[:-1], bounds[1:])]


def _in_threads(work: Callable[[int, int], object], n: int, threads: int, pool: ThreadPoolExecutor) -> None:
    """Run ``work(start, stop)`` on every part of :func:`_thread_parts` in ``pool``; re-raise a part's error."""
    for f in [pool.submit(work, a, b) for a, b in _thread_parts(n, threads)]:
        f.result()


def time_host_copy(src: np.ndarray, out: np.ndarray | None = None, *, kind: str = "numba_parallel",
                   warmup: int = 2, repeat: int = 10) -> timing.Timing:
    """Time one host stream over ``src`` with the host clock: the one way labhelpers times a CPU copy.

    Args:
        src: a contiguous NumPy array; its bytes are copied (or added).
        out: where to copy to (same shape and dtype); a new array when omitted. For ``add_threads`` it is
            ``y`` of ``y += src``: its values grow by ``src`` at every call.
        kind: ``"numba_parallel"`` (:func:`~labhelpers.kernels.roofline.host_copy`, every Numba thread),
            ``"numpy"`` (``np.copyto``, one thread), ``"numpy_threads"`` (``np.copyto`` of one contiguous
            part per thread, as many threads as Numba's) or ``"add_threads"`` (``np.add(out, src, out=out)``
            in as many parts and threads: read two arrays, write one, in place).
        warmup, repeat: calls before timing (the first also compiles Numba's), and calls timed.

    Returns:
        The :class:`~labhelpers.timing.Timing` (median of ``repeat`` calls), ``nbytes`` = bytes read + written
        (twice ``src``'s size for a copy, three times for the add).
    """
    validate.choice(kind, "kind", HOST_STREAM_VARIANTS)
    validate.array(src, "src", ndim=1)
    out = np.empty_like(src) if out is None else out
    validate.array(out, "out", dtype=src.dtype, shape=tuple(src.shape))
    nbytes = _HOST_BYTES_PER_BYTE[kind] * int(src.nbytes)
    if kind == "numba_parallel":
        def copy():
            rk.host_copy(src, out)

        label = f"host copy, Numba prange ({host.host_cpu().numba_threads} threads)"
    elif kind in ("numpy_threads", "add_threads"):
        threads = host.host_cpu().numba_threads
        n = src.shape[0]
        if kind == "numpy_threads":
            def part(a, b):
                np.copyto(out[a:b], src[a:b])

            label = f"host copy, np.copyto in {threads} threads"
        else:
            def part(a, b):
                np.add(out[a:b], src[a:b], out=out[a:b])

            label = f"host in-place add y += x (read 2, write 1), np.add in {threads} threads"
        with ThreadPoolExecutor(max_workers=threads) as pool:
            return timing.wall_time(lambda: _in_threads(part, n, threads, pool), warmup=warmup, repeat=repeat,
                                    nbytes=nbytes, label=label)
    else:
        def copy():
            np.copyto(out, src)

        label = "host copy, np.copyto (one thread)"
    return timing.wall_time(copy, warmup=warmup, repeat=repeat, nbytes=nbytes, label=label)


def measure_host_bandwidth(nbytes: int = HOST_COPY_BYTES, variants: Sequence[str] = HOST_STREAM_VARIANTS,
                           *, repeat: int = 10) -> CeilingMeasurement:
    """The host memory ceiling, this CPU's memory roof: the fastest STREAM-style kernel. Any machine.

    Definition: the best bandwidth, host clock, the fastest of ``repeat`` calls after two warm-up calls (STREAM's
    "best rate": a ceiling is what the memory can deliver, and a host clock around Python threads adds
    dispatch noise that a kernel's own timer does not see), bytes counted read + written (STREAM's convention),
    among :data:`HOST_STREAM_VARIANTS` over two float64 buffers of
    ``nbytes`` each (512 MiB: beyond any last-level cache): copies by every Numba thread (``prange``), by NumPy's
    ``np.copyto`` (one thread) and by ``np.copyto`` split over as many threads, and the in-place add ``y += x``
    in as many threads. A copy's plain stores first read each line they write (write-allocate), traffic its
    byte count leaves out, so on a many-core host a copy alone reads about two thirds of what the memory
    delivers; the in-place add reads every line it writes and has no such hidden traffic. The buffers are first
    written part by part by the threads that stream them (on a machine with several memory nodes, each part's
    pages then sit on its thread's node, as STREAM's parallel initialisation places them).

    Returns:
        The best stream's GB/s; ``how`` names it with the CPU and thread count; ``tried`` holds one dict per
        stream (``kernel``, ``threads``, ``gbps`` (from ``min_ms``), ``median_ms``, ``min_ms``, ``nbytes`` read +
        written per call, ``how``).
    """
    nbytes = validate.integer(nbytes, "nbytes", minimum=8)
    for kind in variants:
        validate.choice(kind, "variants", HOST_STREAM_VARIANTS)
    cpu = host.host_cpu()
    src = np.empty(nbytes // 8, dtype=np.float64)
    dst = np.empty_like(src)

    def first_touch(a, b):  # every page written once, by the thread that streams its part
        src[a:b] = 1.0
        dst[a:b] = 0.0

    with ThreadPoolExecutor(max_workers=cpu.numba_threads) as pool:
        _in_threads(first_touch, src.shape[0], cpu.numba_threads, pool)
    size = f"{src.nbytes / 2**20:,.0f} MiB per buffer"
    tried = []
    for kind in variants:
        t = time_host_copy(src, dst, kind=kind, repeat=repeat)
        threads = 1 if kind == "numpy" else cpu.numba_threads
        best_gbps = t.nbytes / (t.min_ms * 1e-3) / 1e9  # STREAM's best rate: the fastest of the timed calls
        tried.append({"kernel": kind, "threads": threads, "gbps": best_gbps, "median_ms": t.median_ms,
                      "min_ms": t.min_ms, "nbytes": t.nbytes, "how": f"{t.label}, {size}, {cpu.model}"})
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

    ``dram_gbs`` is the DRAM ceiling, :func:`measure_stream_bandwidth` (the best of the copies and the triads);
    ``details["copy_gbs"]`` the copy ceiling of the same measurement (:func:`measure_dram_bandwidth`, the
    yardstick), ``details["tried"]["dram_gbs"]`` its copies and ``details["tried"]["dram_triads"]`` the triads.

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
    copy: list[CeilingMeasurement] = []

    def dram() -> CeilingMeasurement:
        copy.append(measure_dram_bandwidth())
        return measure_stream_bandwidth(copy=copy[0])

    steps: list[tuple[str, str, Callable[[], CeilingMeasurement]]] = [
        ("dram_gbs", "device-memory bandwidth (copies and triads)", dram),
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
    # The DRAM ceiling is the best stream; the copies alone stay under "dram_gbs" (the copy yardstick's table,
    # labhelpers.roofline.copy_variants_table), the triads under "dram_triads", the copy ceiling under "copy_gbs".
    copies = len(copy[0].tried)
    tried["dram_triads"] = tried["dram_gbs"][copies:]
    tried["dram_gbs"] = tried["dram_gbs"][:copies]
    today = _dt.date.today().isoformat()
    ceilings = Ceilings(gpu=info.name, source="measured", label=f"measured on {info.name} ({today})",
                        details={"how": how, "tried": tried, "date": today, "clock_khz": info.clock_khz,
                                 "sm_count": info.sm_count, "compute_capability": info.cc,
                                 "driver": info.driver_version, "copy_gbs": copy[0].value,
                                 "copy_how": copy[0].how}, **values)
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
        c = ceilings_from_table(m.table, m.gpu, m.label, details=reference_details(m.reference.meta))
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
