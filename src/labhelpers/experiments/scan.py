"""Chapter "Scan and the patterns built on it": the measurements behind its tables and plots.

Every function times kernels of :mod:`labhelpers.kernels.scan` on the GPU next to the library call
that does the same job (CUB's scan, ``x[x > t]``, ``cupy.sort``, ``cupyx.scipy.sparse``'s
SpMV) and a device-to-device copy measured in the same run, checks every result, and returns a
DataFrame. They need a GPU with CuPy (:class:`~labhelpers.errors.GPUOnlyError` otherwise);
``bench/scan.py`` stores their tables as the reference data ``ch10_*``, which the chapter shows
under the simulator.

Effective bandwidth is always the bytes the job must move divided by the time: ``8 n`` for a scan
of ``n`` 4-byte values (read once, write once), ``4 (n + kept)`` for compaction, the whole sort's
passes for the radix sort (and keys per second), :func:`~labhelpers.kernels.scan.spmv_bytes` for SpMV.

**The scan's yardstick is CUB's scan itself** (:func:`cub_scan`: ``cub::DeviceScan::InclusiveSum`` through
CuPy's own binding, in place, two kernels: CUB's tile-state initialisation and its single-pass scan).
``cupy.cumsum`` is timed too (method ``cupy_cumsum``), but it is not CUB's scan: CuPy copies the input into
the output with an element-wise kernel and then runs CUB's scan in place there, so it moves 16 bytes per
element where a scan needs 8 (``cupy/_core/_routines_math.pyx``, ``scan_core``, CuPy 14).
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np
import pandas as pd
from numba import cuda

from .. import backend, gpus
from ..errors import GPUOnlyError
from ..kernels import scan as sk
from ..launch import blocks_for
from ..roofline import measure as roofline_measure
from ..timing import benchmark
from ..xp import xp as cp  # CuPy wherever backend.require_gpu(..., needs_cupy=True) passed

#: Scan sizes of the size sweep (4-byte elements).
SIZES = tuple(2**k for k in range(16, 29, 2))
#: The size the chapter's method table uses, and the benchmark's size.
METHOD_N = 2**24
BENCH_N = 2**28
#: Methods timed at METHOD_N (the chained scan is slow: it is timed at CHAINED_N).
CHAINED_N = 2**22
#: Tile shapes of the look-back sweep: (look-back, threads, items, vector loads); ``"block"``: method
#: ``lookback`` (the whole block looks back), ``"warp"``: method ``lookback_warp`` (warp 0 alone, one 64-bit word).
TILE_SHAPES = (("block", 128, 16, True), ("block", 256, 8, True), ("block", 256, 16, True), ("block", 256, 32, True),
               ("block", 512, 16, True), ("block", 256, 16, False),
               ("warp", 512, 8, True), ("warp", 128, 16, True), ("warp", 256, 16, True), ("warp", 256, 32, True),
               ("warp", 128, 32, True), ("warp", 128, 32, False))
#: The single-pass methods and their look-backs.
SINGLE_PASS = {"block": "lookback", "warp": "lookback_warp"}
#: Digit widths and tile shapes of the radix sweep: (bits, threads, items).
RADIX_CONFIGS = ((3, 256, 16), (4, 256, 16), (4, 128, 16), (5, 128, 16), (6, 128, 16))


def _row(**kw) -> dict:
    return kw


def _timing_row(timing, **kw) -> dict:
    row = dict(kw)
    row.update(timing.as_row())
    return row


def random_values(n: int, dtype=np.int32, seed: int = 0):
    """``n`` random values on the GPU (CuPy): small integers in [-8, 8] for int32, uniform [0, 1) for float32."""
    backend.require_gpu("random_values", needs_cupy=True)
    rng = cp.random.default_rng(seed)
    if np.dtype(dtype) == np.int32:
        return (rng.random(n, dtype=cp.float32) * 17).astype(cp.int32) - 8
    return rng.random(n, dtype=cp.float32)


def _scan_ok(got, x, inclusive: bool = True) -> bool:
    """Compare a device scan with CuPy's: exact for int32, within the float32 bound for float32."""
    backend.require_gpu("the scan check", needs_cupy=True)
    got = cp.asarray(got)
    if x.dtype == cp.int32:
        ref = cp.cumsum(x, dtype=cp.int32)
        if not inclusive:
            ref = ref - x
        return bool(cp.array_equal(got, ref))
    ref = cp.cumsum(x, dtype=cp.float64)
    if not inclusive:
        ref = ref - x
    bound = cp.arange(1, x.size + 1, dtype=cp.float64) * 2.0**-24 * cp.cumsum(cp.abs(x), dtype=cp.float64) + 1e-6
    return bool(cp.all(cp.abs(got - ref) <= bound))


def time_copy(x, repeat: int = 20, number: int = 10):
    """A device-to-device copy of ``x`` (CuPy), bytes read + written: the ceiling of anything that reads and writes.

    Timed by the one copy measurement, :func:`labhelpers.roofline.time_copy`.
    """
    return roofline_measure.time_copy(x, repeat=repeat, number=number)


def time_cumsum(x, repeat: int = 20, number: int = 10):
    """``cupy.cumsum`` into a preallocated output of the same type (8 bytes per 4-byte element)."""
    backend.require_gpu("time_cumsum", needs_cupy=True)
    out = cp.empty_like(x)
    return benchmark(lambda: cp.cumsum(x, dtype=x.dtype, out=out), nbytes=2 * x.nbytes, repeat=repeat,
                     number=number, label="cupy.cumsum")


#: What :func:`cub_scan` runs, as the tables name it.
CUB_SCAN_TITLE = "CUB DeviceScan::InclusiveSum (in place, no copy)"


def cub_scan(buf) -> None:
    """CUB's inclusive sum of the CuPy array ``buf``, in place: CUB's scan with no copy around it.

    Calls ``cupy.cuda.cub.device_scan`` (CuPy's binding of ``cub::DeviceScan::InclusiveSum``, the function
    ``cupy.cumsum`` ends in), which launches CUB's two kernels on the current stream and takes its workspace
    from CuPy's memory pool. ``buf`` must be a contiguous 1-D CuPy array of fewer than 2^31 elements (CUB's
    ``int`` count).

    Raises:
        GPUOnlyError: without a GPU, or where CuPy was built without CUB.
    """
    backend.require_gpu("cub_scan", needs_cupy=True)
    try:
        from cupy.cuda import cub  # CuPy's CUB binding: part of the optional GPU extra
    except ImportError:  # pragma: no cover - depends on the CuPy build
        raise GPUOnlyError("this CuPy was built without CUB (cupy.cuda.cub), so CUB's scan cannot be timed") from None
    if not (isinstance(buf, cp.ndarray) and buf.ndim == 1 and buf.flags.c_contiguous and buf.size < 2**31):
        raise ValueError("cub_scan scans a contiguous 1-D CuPy array of fewer than 2**31 elements in place")
    cub.device_scan(buf, cub.CUPY_CUB_CUMSUM)


def time_cub_scan(x, repeat: int = 20, number: int = 10):
    """CUB's own scan of ``x``, checked, then timed in place on a copy (8 bytes per 4-byte element).

    Returns ``(Timing, ok)``: ``ok`` compares the first scan with the float64/int32 reference of
    :func:`_scan_ok`. The timed scans rescan their own output (a scan's speed does not depend on the values).
    """
    buf = x.copy()
    cub_scan(buf)
    ok = _scan_ok(buf, x)
    timing = benchmark(lambda: cub_scan(buf), nbytes=2 * x.nbytes, repeat=repeat, number=number,
                       label="CUB DeviceScan::InclusiveSum")
    return timing, ok


def cupy_accelerators() -> str:
    """The routine accelerators CuPy uses (``cub`` means ``cupy.cumsum``, sums and sorts go through CUB)."""
    backend.require_gpu("cupy_accelerators", needs_cupy=True)
    try:
        from cupy._core import _accelerator  # optional: the GPU extra

        names = {v: k for k, v in vars(_accelerator).items() if k.startswith("ACCELERATOR_")}
        return ",".join(names.get(a, str(a)).replace("ACCELERATOR_", "").lower()
                        for a in _accelerator.get_routine_accelerators()) or "none"
    except Exception:  # pragma: no cover - private API
        return f"unknown (cupy {cp.__version__})"


def time_scan(x, method: str, *, inclusive: bool = True, threads: int | None = None, items: int | None = None,
              repeat: int = 20, number: int = 10):
    """Check and time one scan method on the CuPy array ``x``; returns ``(Timing, ok, launches)``.

    ``ok``: the result equals ``cupy.cumsum``'s after the first launch and after the timed ones (which reuse the
    single passes' flags and words, epoch after epoch)."""
    s = sk.Scan(x, method, inclusive, threads, items)
    s.launch()
    ok = _scan_ok(s.out, x, inclusive)
    timing = benchmark(s.launch, nbytes=s.nbytes, repeat=repeat, number=number, label=method)
    ok = ok and _scan_ok(s.out, x, inclusive)
    return timing, ok, len(s.launches)


#: Mean segment lengths of :func:`segmented_table` (``None``: one segment, no head flag at all).
SEGMENT_LENGTHS: tuple[int | None, ...] = (32, 1024, None)


def segmented_table(n: int = METHOD_N, lengths: Sequence[int | None] = SEGMENT_LENGTHS, *, repeat: int = 10,
                    number: int = 5) -> pd.DataFrame:
    """The segmented scan against unsegmented scans of the same float32 data (256 threads per block). GPU only.

    Rows: ``hillis_steele`` (the unsegmented scan with the segmented one's structure: Hillis-Steele block
    scans, totals scanned recursively, then propagated), ``lookback`` (the single pass with the block
    look-back), and
    ``segmented`` for each mean segment length (head flags random with probability 1/length; ``None``:
    no flag). Columns ``median_ms``, ``gbps`` (8 n bytes / time for the plain scans, 12 n for the
    segmented: the flags are read too), ``ratio_hillis_steele`` and ``ratio_lookback`` (time / that
    scan's time: the lecture notes' "3 times slower" is the first). The segmented results are checked
    against a CuPy computation of the same sums first.
    """
    backend.require_gpu("segmented_table", needs_cupy=True)
    x = cp.floor(random_values(n, np.float32, seed=3) * 17) - 8  # small integers: every order of sums is exact
    x = x.astype(cp.float32)
    rows = []
    for method in ("hillis_steele", "lookback"):
        timing, ok, launches = time_scan(x, method, threads=256, repeat=repeat, number=number)
        rows.append({"kind": method, "segment_length": float("nan"), "segments": 1, "n": n, "launches": launches,
                     "ok": ok, "median_ms": timing.median_ms, "gbps": 8 * n / (timing.median_ms * 1e-3) / 1e9})
    for length in lengths:
        heads = (cp.random.default_rng(4).random(n) < 1.0 / length).astype(cp.int32) if length else \
            cp.zeros(n, dtype=cp.int32)
        seg = sk.SegmentedScan(x, heads, threads=256)
        seg.launch()
        starts = heads != 0
        starts[0] = True  # element 0 heads the first segment
        first_of = cp.flatnonzero(starts)[cp.cumsum(starts) - 1]  # index of each element's segment head
        total = cp.cumsum(x, dtype=cp.float64)
        want = total - (total - x)[first_of]
        ok = bool(cp.array_equal(cp.asarray(seg.out).astype(cp.float64), want))
        timing = benchmark(seg.launch, nbytes=12 * n, repeat=repeat, number=number, label=f"segmented {length}")
        rows.append({"kind": "segmented", "segment_length": float(length or n), "segments": int(heads.sum()) + 1,
                     "n": n, "launches": len(seg.steps), "ok": ok, "median_ms": timing.median_ms,
                     "gbps": 12 * n / (timing.median_ms * 1e-3) / 1e9})
        del seg
    table = pd.DataFrame(rows)
    for method in ("hillis_steele", "lookback"):
        table[f"ratio_{method}"] = table["median_ms"] / float(table.loc[table["kind"] == method, "median_ms"].iloc[0])
    return table


def methods_table(n: int = METHOD_N, dtype=np.int32, *, chained_n: int = CHAINED_N, repeat: int = 10,
                  number: int = 5) -> pd.DataFrame:
    """Every scan method (256 threads per block) at ``n`` elements, then CUB's scan, ``cupy.cumsum`` and the copy.

    Columns: method, title, n, dtype, launches, bytes_per_element (what the method moves: 16, 12 or 8),
    median_ms, gbps (effective: ``8 n`` bytes / time), ok (checked against ``cupy.cumsum``). CUB's scan
    (:func:`cub_scan`) is method ``cub_scan``; ``cupy.cumsum`` (a copy, then CUB's scan) moves 16 bytes.
    """
    rows = []
    for key, info in sk.METHODS.items():
        size = chained_n if key == "chained" else n
        x = random_values(size, dtype)
        timing, ok, launches = time_scan(x, key, repeat=repeat, number=number)
        rows.append(_timing_row(timing, method=key, title=info.title, n=size, dtype=np.dtype(dtype).name,
                                launches=launches, bytes_per_element=info.passes, ok=ok))
        del x
    x = random_values(n, dtype)
    timing, ok = time_cub_scan(x, repeat, number)
    rows.append(_timing_row(timing, method="cub_scan", title=CUB_SCAN_TITLE, n=n, dtype=np.dtype(dtype).name,
                            launches=2, bytes_per_element=8, ok=ok))
    rows.append(_timing_row(time_cumsum(x, repeat, number), method="cupy_cumsum",
                            title=f"cupy.cumsum ({cupy_accelerators()}: copy + CUB scan)", n=n,
                            dtype=np.dtype(dtype).name, launches=math.nan, bytes_per_element=16, ok=True))
    rows.append(_timing_row(time_copy(x, repeat, number), method="copy", title="copy (read + write)", n=n,
                            dtype=np.dtype(dtype).name, launches=1, bytes_per_element=8, ok=True))
    return pd.DataFrame(rows)


def sizes_table(sizes: Sequence[int] = SIZES, dtypes=(np.int32, np.float32), *, repeat: int = 10,
                number: int = 10) -> pd.DataFrame:
    """The single passes (block and warp look-back), the tiled three-kernel scan, CUB's scan, ``cupy.cumsum`` and
    the copy against the size, each method with its default tile."""
    rows = []
    for dtype in dtypes:
        for n in sizes:
            x = random_values(n, dtype)
            for key in ("lookback", "lookback_warp", "tiled_reduce_then_scan"):
                timing, ok, _ = time_scan(x, key, repeat=repeat, number=number)
                rows.append(_timing_row(timing, method=key, n=n, dtype=np.dtype(dtype).name, ok=ok))
            timing, ok = time_cub_scan(x, repeat, number)
            rows.append(_timing_row(timing, method="cub_scan", n=n, dtype=np.dtype(dtype).name, ok=ok))
            rows.append(_timing_row(time_cumsum(x, repeat, number), method="cupy_cumsum", n=n,
                                    dtype=np.dtype(dtype).name, ok=True))
            rows.append(_timing_row(time_copy(x, repeat, number), method="copy", n=n, dtype=np.dtype(dtype).name,
                                    ok=True))
            del x
    return pd.DataFrame(rows)


def block_scans_table(n: int = 2**24, threads: Sequence[int] = (128, 256, 512, 1024), *, repeat: int = 10,
                      number: int = 5) -> pd.DataFrame:
    """The in-block kernels alone (every block scans its own part, no carry): Hillis-Steele, Blelloch with and
    without padding, warp shuffles, on int32, for several block sizes. ``gbps``: ``8 n`` bytes / time."""

    backend.require_gpu("block_scans_table", needs_cupy=True)
    x = random_values(n, np.int32)
    xn = cuda.as_cuda_array(x)
    out = cp.empty_like(x)
    on = cuda.as_cuda_array(out)
    empty = cuda.device_array(0, dtype=np.int32)
    rows = []
    for kernel, tk, per in (("hillis_steele", sk.hillis_steele_scan, 1), ("blelloch", sk.blelloch_scan, 2),
                            ("blelloch_unpadded", sk.blelloch_scan_unpadded, 2),
                            ("shuffle", sk.block_scan_shuffle, 1)):
        k = tk.for_dtype(np.int32)
        for t in threads:
            blocks = blocks_for(n, t, per)
            args = (xn, on, empty) + ((empty,) if per == 2 else ()) + (1,)
            launch = k[blocks, t]
            launch(*args)
            ok = bool(cp.array_equal(out, cp.asarray(sk.block_scan_reference(cp.asnumpy(x), per * t))))
            timing = benchmark(lambda: launch(*args), nbytes=8 * n, repeat=repeat, number=number, label=kernel)
            rows.append(_timing_row(timing, kernel=kernel, threads=t, elements_per_block=per * t, n=n, ok=ok))
    return pd.DataFrame(rows)


def lookback_tiles_table(n: int = BENCH_N, shapes=TILE_SHAPES, dtype=np.int32, *, repeat: int = 10,
                         number: int = 10) -> pd.DataFrame:
    """Both single passes for several tile shapes: ``shapes`` holds (look-back, threads, items, 16-byte loads).

    Columns: lookback (``"block"`` or ``"warp"``), method (``lookback`` or ``lookback_warp``), threads, items,
    tile, vector, n, dtype, ok (checked against ``cupy.cumsum`` before the timing AND after it: the timed
    launches reuse the same flags or words, epoch after epoch), and the timing's columns.
    """
    rows = []
    x = random_values(n, dtype)
    for lookback, threads, items, vector in shapes:
        method = SINGLE_PASS[lookback]
        s = sk.Scan(x, method, True, threads, items, vector=vector)
        s.launch()
        ok = _scan_ok(s.out, x)
        timing = benchmark(s.launch, nbytes=s.nbytes, repeat=repeat, number=number, label=method)
        ok = ok and _scan_ok(s.out, x)
        rows.append(_timing_row(timing, lookback=lookback, method=method, threads=threads, items=items,
                                tile=threads * items, vector=vector, n=n, dtype=np.dtype(dtype).name, ok=ok))
    return pd.DataFrame(rows)


def compaction_table(n: int = BENCH_N, fractions: Sequence[float] = (0.1, 0.5, 0.9), *, repeat: int = 10,
                     number: int = 5) -> pd.DataFrame:
    """Keep the float32 values above a threshold: one-pass and three-kernel compaction against CuPy's
    ``x[x > t]`` (whole job) and ``x[mask]`` (mask given). Every timing includes the copy of the count to
    the host (needed to use the result). ``gbps``: ``4 (n + kept)`` bytes / time."""
    backend.require_gpu("compaction_table", needs_cupy=True)
    x = random_values(n, np.float32)
    rows = []
    for frac in fractions:
        t = np.float32(1.0 - frac)
        ref = x[x > t]
        kept = int(ref.size)
        nbytes = 4 * (n + kept)
        for method in ("single_pass", "three_kernels"):
            c = sk.Compactor(x, t, method)
            got = c()
            ok = got == kept and bool(cp.array_equal(cp.asarray(c.out)[:kept], ref))
            timing = benchmark(c, nbytes=nbytes, repeat=repeat, number=number, label=method)
            rows.append(_timing_row(timing, method=method, keep_fraction=frac, n=n, kept=kept, ok=ok))
        timing = benchmark(lambda: x[x > t], nbytes=nbytes, repeat=repeat, number=number, label="cupy x[x > t]")
        rows.append(_timing_row(timing, method="cupy_mask", keep_fraction=frac, n=n, kept=kept, ok=True))
        mask = x > t
        timing = benchmark(lambda: x[mask], nbytes=nbytes, repeat=repeat, number=number, label="cupy x[mask]")
        rows.append(_timing_row(timing, method="cupy_given_mask", keep_fraction=frac, n=n, kept=kept, ok=True))
        del mask, ref
    return pd.DataFrame(rows)


def radix_table(n: int = 2**26, configs=RADIX_CONFIGS, *, repeat: int = 5, number: int = 3) -> pd.DataFrame:
    """The LSD radix sort of ``n`` random uint32 keys for several digit widths, and ``cupy.sort``.

    Columns: method, bits, threads, items, passes, median_ms, gkeys (10^9 keys/s), gbps (the passes'
    bytes / time, :func:`~labhelpers.kernels.scan.radix_pass_bytes`), ok (equal to ``cupy.sort``).
    """
    backend.require_gpu("radix_table", needs_cupy=True)
    keys = (cp.random.default_rng(1).random(n, dtype=cp.float64) * 2.0**32).astype(cp.uint32)
    ref = cp.sort(keys)
    rows = []
    for bits, threads, items in configs:
        try:
            sorter = sk.RadixSorter(keys, bits, threads, items)
        except sk.LaunchConfigError as exc:
            rows.append(_row(method="radix", bits=bits, threads=threads, items=items, passes=sk.radix_passes(bits),
                             median_ms=math.nan, gkeys=math.nan, gbps=math.nan, ok=False, note=str(exc)))
            continue
        sorter.launch()
        ok = bool(cp.array_equal(cp.asarray(sorter.out), ref))
        timing = benchmark(sorter.launch, nbytes=sorter.nbytes, repeat=repeat, number=number, label=f"radix {bits}")
        row = _timing_row(timing, method="radix", bits=bits, threads=threads, items=items, passes=sorter.passes,
                          ok=ok, note="")
        row["gkeys"] = n / (row["median_ms"] * 1e-3) / 1e9
        rows.append(row)
        del sorter
    timing = benchmark(lambda: cp.sort(keys), nbytes=None, repeat=repeat, number=number, label="cupy.sort")
    row = _timing_row(timing, method="cupy_sort", bits=math.nan, threads=math.nan, items=math.nan,
                      passes=math.nan, ok=True, note="")
    row["gkeys"] = n / (row["median_ms"] * 1e-3) / 1e9
    rows.append(row)
    table = pd.DataFrame(rows)
    table.insert(1, "n", n)
    return table


def bench_matrices(scale: int = 1, xp=None) -> list:
    """The SpMV test matrices, built on the GPU: a 2D Laplacian, a power-law graph, empty and very long rows.

    ``scale = 1``: 16.8 million rows (Laplacian 4096 x 4096), 8 million (power law, mean 8 per row),
    8 million (half empty, four rows of 2 million non-zeros).
    """
    if xp is None:
        backend.require_gpu("bench_matrices", needs_cupy=True)
        xp = cp
    k = 4096 // scale
    n = 2**23 // scale
    return [sk.laplacian_2d(k, xp=xp),
            sk.power_law_matrix(n, mean_row=8.0, exponent=2.0, xp=xp),
            sk.empty_and_long_rows(n, long_rows=4, long_length=n // 4, xp=xp)]


def spmv_table(matrices=None, methods: Sequence[str] = tuple(sk.SPMV_METHODS), *, repeat: int = 10,
               number: int = 5) -> pd.DataFrame:
    """Every SpMV kernel and ``cupyx.scipy.sparse``'s (cuSPARSE) on each matrix: effective bandwidth
    (:func:`~labhelpers.kernels.scan.spmv_bytes` / time) and the largest error relative to the float64 bound."""
    backend.require_gpu("spmv_table", needs_cupy=True)
    import cupyx.scipy.sparse as cps  # optional: the GPU extra

    matrices = matrices if matrices is not None else bench_matrices()
    rows = []
    for a in matrices:
        info = a.describe()
        x = cp.random.default_rng(2).random(a.n_cols, dtype=cp.float32)
        ref = sk.spmv_reference(a.row_ptr, a.col_idx, a.values, x)
        bound = sk.spmv_error_bound(a.row_ptr, a.col_idx, a.values, x)
        nbytes = sk.spmv_bytes(a.n_rows, a.n_cols, a.nnz)
        for method in methods:
            m = sk.SpMV(a, x, method)
            y = m()
            worst = float(np.max(np.abs(y - ref) / bound)) if a.n_rows else 0.0
            timing = benchmark(m.launch, nbytes=nbytes, repeat=repeat, number=number, label=method)
            rows.append(_timing_row(timing, method=method, err_over_bound=worst, ok=worst <= 1.0, **info))
        mat = cps.csr_matrix((a.values, a.col_idx, a.row_ptr), shape=(a.n_rows, a.n_cols))
        y = cp.asnumpy(mat @ x)
        worst = float(np.max(np.abs(y - ref) / bound)) if a.n_rows else 0.0
        timing = benchmark(lambda: mat @ x, nbytes=nbytes, repeat=repeat, number=number, label="cusparse")
        rows.append(_timing_row(timing, method="cusparse", err_over_bound=worst, ok=worst <= 1.0, **info))
        del mat, x
    return pd.DataFrame(rows)


def histogram_table(n: int = 2**26, bins: Sequence[int] = (16, 256, 1024), *, repeat: int = 10,
                    number: int = 5) -> pd.DataFrame:
    """Global against shared-memory atomics for uniform values and for values all in one bin."""

    backend.require_gpu("histogram_table", needs_cupy=True)
    rows = []
    gpu = gpus.current()
    for nb in bins:
        for data in ("uniform", "one bin"):
            v = ((cp.random.default_rng(3).random(n, dtype=cp.float32) * nb).astype(cp.int32) % nb
                 if data == "uniform" else cp.full(n, nb - 1, dtype=cp.int32))
            vn = cuda.as_cuda_array(v)
            ref = cp.bincount(v, minlength=nb)
            for method, kernel in (("global", sk.histogram_global_atomics), ("shared", sk.histogram_shared_atomics)):
                counts = cp.zeros(nb, dtype=cp.int32)
                cn = cuda.as_cuda_array(counts)
                launch = kernel[gpu.sm_count * gpu.blocks_per_sm(256), 256]  # one full wave of 256-thread blocks
                launch(vn, cn)
                ok = bool(cp.array_equal(counts, ref))

                def run(launch=launch, vn=vn, cn=cn, counts=counts):
                    counts.fill(0)
                    launch(vn, cn)

                timing = benchmark(run, nbytes=4 * n, repeat=repeat, number=number, label=method)
                rows.append(_timing_row(timing, method=method, bins=nb, data=data, n=n, ok=ok))
    return pd.DataFrame(rows)
