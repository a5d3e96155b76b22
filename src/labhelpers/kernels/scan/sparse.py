"""Sparse matrix-vector product ``y = A x`` with ``A`` in CSR: the matrices, the NumPy specification,
and four kernels (scalar, warp per row, segmented scan, merge-based) behind :class:`SpMV`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import cuda, float32, int32

from ... import backend, validate
from ...arrays import to_device, to_host
from ...errors import ArgumentError, ArrayArgumentError
from ...launch import blocks_for, tiles_for
from .definitions import FULL_MASK, MAX_THREADS, WARP
from .planner import Launch, _threads_for

#: The slide's 3 x 3 example: A = [[a, 0, b], [c, d, e], [0, 0, f]] with a..f = 1..6.
SLIDE_CSR_VALUES = (1.0, 2.0, 3.0, 4.0, 5.0, 6.0)
SLIDE_CSR_INDEX = (0, 2, 0, 1, 2, 2)
#: As printed on the slide: one entry short (a CSR row pointer has n_rows + 1 entries, the last is nnz = 6).
SLIDE_ROW_PTR_AS_PRINTED = (0, 2, 5)
SLIDE_ROW_PTR = (0, 2, 5, 6)

#: Threads per block and merge items per thread of the merge-based SpMV kernels. Few items per thread keep a
#: block's shared memory small, so more blocks, and more gathers of ``x`` in flight, fit on an SM. On an H100
#: (power-law matrix, 2^23 rows): 16 items, 18 KB per block, 11 blocks per SM (69% occupancy), 0.49x
#: cuSPARSE; 8 items, 10 KB, 16 blocks (100%), 0.75x; 4 items, 0.83x.
MERGE_THREADS = 128
MERGE_ITEMS = 4
MERGE_TILE = MERGE_THREADS * MERGE_ITEMS
MERGE_ROWS = MERGE_TILE + 2  # row starts a tile needs: its rows, and the start of the one after

#: The SpMV kernels: key -> (title, what it needs or "").
SPMV_METHODS = {
    "scalar": ("scalar (one thread per row)", ""),
    "warp_per_row": ("warp per row", "cuda.shfl_down_sync()"),
    "segmented_scan": ("segmented scan (the slide's formulation)", ""),
    "merge": ("merge-based (rows and non-zeros split evenly)", ""),
    "merge_combined": ("merge-based, partial sums combined in the block", ""),
}


@dataclass(frozen=True)
class CSR:
    """A sparse matrix in compressed sparse row form (float32 values, int32 indices), on the host.

    ``row_ptr`` has ``n_rows + 1`` entries: row ``r``'s non-zeros are ``values[row_ptr[r]:row_ptr[r+1]]``
    in columns ``col_idx[row_ptr[r]:row_ptr[r+1]]``, so ``row_ptr[-1]`` is the number of non-zeros.
    """

    row_ptr: np.ndarray
    col_idx: np.ndarray
    values: np.ndarray
    n_cols: int
    name: str = ""

    @property
    def n_rows(self) -> int:
        return int(self.row_ptr.size - 1)

    @property
    def nnz(self) -> int:
        return int(self.values.size)

    def row_lengths(self) -> np.ndarray:
        """Non-zeros per row (NumPy)."""
        return np.diff(to_host(self.row_ptr))

    def to_host(self) -> "CSR":
        """The same matrix with NumPy arrays (a matrix built with CuPy lives on the GPU)."""
        return CSR(to_host(self.row_ptr), to_host(self.col_idx), to_host(self.values), self.n_cols, self.name)

    def describe(self) -> dict:
        """Rows, columns, non-zeros, empty rows and the longest row: what decides which kernel wins."""
        lengths = self.row_lengths()
        return {"matrix": self.name, "rows": self.n_rows, "cols": self.n_cols, "nnz": self.nnz,
                "mean_row": float(lengths.mean()) if lengths.size else 0.0,
                "max_row": int(lengths.max()) if lengths.size else 0,
                "empty_rows": int(np.count_nonzero(lengths == 0))}


def check_csr(row_ptr, col_idx, values, n_cols: int | None = None) -> None:
    """Raise :class:`~labhelpers.errors.ArrayArgumentError` unless the three arrays form a valid CSR matrix.

    Catches the slide's slip: a ``row_ptr`` without its last entry (``nnz``) describes one row too few.
    """
    validate.array(row_ptr, "row_ptr", dtype=np.int32, ndim=1)
    validate.array(col_idx, "col_idx", dtype=np.int32, ndim=1)
    validate.array(values, "values", dtype=np.float32, ndim=1)
    rp = to_host(row_ptr)
    nnz = int(values.shape[0])
    if int(col_idx.shape[0]) != nnz:
        raise ArrayArgumentError(f"col_idx has {col_idx.shape[0]} entries and values {nnz}: there is one column "
                                 "index per non-zero value")
    if rp.size < 1 or rp[0] != 0:
        raise ArrayArgumentError("row_ptr must start with 0 (row 0's first non-zero is non-zero number 0)")
    if np.any(np.diff(rp) < 0):
        raise ArrayArgumentError("row_ptr must never decrease: row r's non-zeros are row_ptr[r] .. row_ptr[r+1] - 1")
    if rp[-1] != nnz:
        hint = (f": it looks like the last entry is missing (a matrix of n rows needs n + 1 entries, the last one "
                f"being nnz = {nnz}; append it)" if rp[-1] < nnz else "")
        raise ArrayArgumentError(f"row_ptr ends with {rp[-1]}, but there are {nnz} non-zeros{hint}")
    if n_cols is not None and nnz:
        ci = to_host(col_idx)
        if ci.min() < 0 or ci.max() >= n_cols:
            raise ArrayArgumentError(f"col_idx holds columns from {ci.min()} to {ci.max()}, outside 0 .. {n_cols - 1}")


def csr_from_dense(a, name: str = "") -> CSR:
    """The CSR form of a dense 2-D array (its non-zero entries)."""
    a = np.asarray(a, dtype=np.float32)
    if a.ndim != 2:
        raise ArrayArgumentError(f"a dense matrix is 2-D, got shape {a.shape}")
    rows, cols = np.nonzero(a)
    row_ptr = np.zeros(a.shape[0] + 1, np.int32)
    np.add.at(row_ptr, rows + 1, 1)
    return CSR(np.cumsum(row_ptr).astype(np.int32), cols.astype(np.int32), a[rows, cols].astype(np.float32),
               a.shape[1], name)


def laplacian_2d(k: int, xp=np) -> CSR:
    """The 5-point Laplacian of a ``k x k`` grid: ``k**2`` rows of at most 5 non-zeros (4 on the diagonal, -1 beside).

    Rows in order, columns sorted within each row. ``xp``: ``numpy`` (default) or ``cupy`` (built on the GPU).
    """
    k = validate.integer(k, "k", minimum=1)
    n = k * k
    r = xp.arange(n, dtype=xp.int64)
    i, j = r // k, r % k
    cols, keep, vals = [], [], []
    for di, dj, v in ((-1, 0, -1.0), (0, -1, -1.0), (0, 0, 4.0), (0, 1, -1.0), (1, 0, -1.0)):  # column order
        keep.append((i + di >= 0) & (i + di < k) & (j + dj >= 0) & (j + dj < k))
        cols.append(r + di * k + dj)
        vals.append(xp.full(n, v, dtype=xp.float32))
    keep, cols, vals = xp.stack(keep, axis=1), xp.stack(cols, axis=1), xp.stack(vals, axis=1)
    row_ptr = xp.zeros(n + 1, dtype=xp.int64)
    row_ptr[1:] = xp.cumsum(keep.sum(axis=1))
    return CSR(row_ptr.astype(xp.int32), cols[keep].astype(xp.int32), vals[keep], n, f"2D Laplacian {k}x{k}")


def power_law_matrix(n: int, mean_row: float = 8.0, exponent: float = 2.0, seed: int = 0, xp=np) -> CSR:
    """An ``n x n`` matrix whose row lengths follow a power law (a few huge rows, many short ones), like a web graph.

    Row lengths: a Pareto distribution with tail ``exponent`` (``P(len > L) ~ L**-(exponent - 1)``),
    scaled to about ``mean_row`` non-zeros per row and capped at ``n``; columns uniform at random.
    """
    n = validate.integer(n, "n", minimum=1)
    rng = np.random.default_rng(seed)
    raw = rng.pareto(exponent - 1.0, size=n) + 1.0
    lengths = np.minimum(np.round(raw * mean_row / raw.mean()), n).astype(np.int64)
    return _random_rows(lengths, n, seed, f"power law (n={n:,}, exponent {exponent:g})", xp)


def empty_and_long_rows(n: int, long_rows: int = 4, long_length: int | None = None, mean_row: float = 4.0,
                        empty_fraction: float = 0.5, seed: int = 0, xp=np) -> CSR:
    """An ``n x n`` matrix where about half the rows are empty, most others short, and ``long_rows`` rows very long
    (``long_length`` non-zeros each, default ``n // 2``)."""
    n = validate.integer(n, "n", minimum=1)
    rng = np.random.default_rng(seed)
    lengths = rng.poisson(mean_row / (1 - empty_fraction), size=n)
    lengths[rng.random(n) < empty_fraction] = 0
    long_length = n // 2 if long_length is None else long_length
    lengths[rng.choice(n, size=min(long_rows, n), replace=False)] = min(long_length, n)
    return _random_rows(lengths.astype(np.int64), n, seed, f"empty and long rows (n={n:,})", xp)


def _random_rows(lengths: np.ndarray, n_cols: int, seed: int, name: str, xp=np) -> CSR:
    """A CSR matrix with the given row lengths, random columns (sorted within rows) and values in [-1, 1)."""
    row_ptr = np.zeros(lengths.size + 1, np.int64)
    np.cumsum(lengths, out=row_ptr[1:])
    nnz = int(row_ptr[-1])
    d_ptr = xp.asarray(row_ptr)
    rows = xp.searchsorted(d_ptr[1:], xp.arange(nnz, dtype=xp.int64), side="right")
    rng = xp.random.default_rng(seed)
    cols = xp.minimum((rng.random(nnz) * n_cols).astype(xp.int64), n_cols - 1)
    key = xp.sort(rows * n_cols + cols)
    vals = (rng.random(nnz, dtype=xp.float32) * 2 - 1).astype(xp.float32)
    return CSR(d_ptr.astype(xp.int32), (key % n_cols).astype(xp.int32), vals, n_cols, name)


def spmv_reference(row_ptr, col_idx, values, x) -> np.ndarray:
    """NumPy, in float64: ``y[r] = sum of values[k] * x[col_idx[k]]`` over row ``r``'s non-zeros (0 for an empty row)."""
    row_ptr = to_host(row_ptr)
    rows = np.repeat(np.arange(row_ptr.size - 1), np.diff(row_ptr))
    products = to_host(values).astype(np.float64) * to_host(x).astype(np.float64)[to_host(col_idx)]
    return np.bincount(rows, weights=products, minlength=row_ptr.size - 1)


def spmv_error_bound(row_ptr, col_idx, values, x) -> np.ndarray:
    """Per row, a bound on the float32 error: ``(len + 1) * u * sum |values * x|`` (any order of the additions)."""
    lengths = np.diff(to_host(row_ptr))
    rows = np.repeat(np.arange(lengths.size), lengths)
    mags = np.abs(to_host(values).astype(np.float64) * to_host(x).astype(np.float64)[to_host(col_idx)])
    return (lengths + 2) * 2.0**-24 * np.bincount(rows, weights=mags, minlength=lengths.size) + 1e-30


def spmv_bytes(n_rows: int, n_cols: int, nnz: int) -> int:
    """Bytes an SpMV must move at least: values and column indices (8 per non-zero), ``row_ptr`` (4 per row + 4),
    ``x`` read once (4 per column) and ``y`` written once (4 per row). Effective bandwidth = this / time."""
    return 8 * int(nnz) + 4 * (int(n_rows) + 1) + 4 * int(n_cols) + 4 * int(n_rows)


@cuda.jit
def spmv_csr_scalar(row_ptr, col_idx, values, x, y):
    """One thread per row: thread ``r`` walks row ``r``'s non-zeros.

    Simple, and fine for short rows of similar length. The threads of a warp read ``values`` at
    addresses far apart (one row each: uncoalesced), and a warp with one long row waits for it.
    """
    row = cuda.grid(1)
    if row < y.size:
        acc = float32(0)
        for k in range(row_ptr[row], row_ptr[row + 1]):
            acc += values[k] * x[col_idx[k]]
        y[row] = acc


@cuda.jit
def spmv_csr_warp_per_row(row_ptr, col_idx, values, x, y):
    """One warp per row: lane ``l`` adds non-zeros ``l, l + 32, ...`` of the row, then a warp sum (GPU only).

    The warp reads each row in coalesced 128-byte runs; rows shorter than 32 leave lanes idle.
    """
    row = cuda.grid(1) // WARP
    lane = cuda.threadIdx.x % WARP
    if row < y.size:  # the same for the whole warp: every lane reaches the shuffles
        acc = float32(0)
        k = row_ptr[row] + lane
        end = row_ptr[row + 1]
        while k < end:
            acc += values[k] * x[col_idx[k]]
            k += WARP
        for offset in (16, 8, 4, 2, 1):
            acc += cuda.shfl_down_sync(FULL_MASK, acc, offset)
        if lane == 0:
            y[row] = acc


@cuda.jit
def spmv_products(col_idx, values, x, products, heads):
    """Segmented-scan SpMV, step 1: ``products[k] = values[k] * x[col_idx[k]]``, and clear the head flags."""
    k = cuda.grid(1)
    if k < values.size:
        products[k] = values[k] * x[col_idx[k]]
        heads[k] = 0


@cuda.jit
def spmv_mark_heads(row_ptr, heads):
    """Segmented-scan SpMV, step 2: flag the first non-zero of every non-empty row (one segment per row)."""
    r = cuda.grid(1)
    if r < row_ptr.size - 1 and row_ptr[r] < row_ptr[r + 1]:
        heads[row_ptr[r]] = 1


@cuda.jit
def segmented_scan_block(values, heads, out, seen, block_values, block_heads):
    """Inclusive segmented scan of each block's ``blockDim.x`` values: sums restart at every head flag.

    Hillis-Steele on pairs (flag, value) with the operator
    ``(f1, v1) + (f2, v2) = (f1 or f2, v2 if f2 else v1 + v2)``, which is associative, so every
    scan algorithm works on it. ``seen[i]`` = whether a head flag occurs in the block at or before
    ``i``; the last thread stores the block's (flag, value) for the next level.
    """
    sv = cuda.shared.array((2, MAX_THREADS), float32)
    sf = cuda.shared.array((2, MAX_THREADS), int32)
    tid = cuda.threadIdx.x
    i = cuda.blockIdx.x * cuda.blockDim.x + tid
    sv[0, tid] = values[i] if i < values.size else float32(0)
    sf[0, tid] = heads[i] if i < values.size else 0
    cuda.syncthreads()  # RAW: every pair is in shared memory before step 1 reads it
    src = 0
    offset = 1
    while offset < cuda.blockDim.x:
        f = sf[src, tid]
        v = sv[src, tid]
        if tid >= offset:
            if f == 0:
                v += sv[src, tid - offset]
            f |= sf[src, tid - offset]
        sv[1 - src, tid] = v
        sf[1 - src, tid] = f
        cuda.syncthreads()  # RAW: this step is written before the next reads it (WAR: the other buffer)
        src = 1 - src
        offset *= 2
    if i < values.size:
        out[i] = sv[src, tid]
        seen[i] = sf[src, tid]
    if tid == cuda.blockDim.x - 1:
        block_values[cuda.blockIdx.x] = sv[src, tid]
        block_heads[cuda.blockIdx.x] = sf[src, tid]


@cuda.jit
def segmented_propagate(out, seen, carry, per_block):
    """Add the segmented carry of the blocks before to the elements before their block's first head flag."""
    i = cuda.grid(1)
    if i < out.size:
        b = i // per_block
        if b > 0 and seen[i] == 0:
            out[i] += carry[b - 1]


def plan_segmented_scan(values, heads, out, n: int, threads: int) -> list[Launch]:
    """The launches of an inclusive segmented scan of ``values`` (float32) by ``heads`` (int32) into ``out``.

    One :func:`segmented_scan_block` per block of ``threads`` elements; the blocks' (flag, total) pairs
    are scanned the same way, recursively, and :func:`segmented_propagate` adds each block's carry to
    its elements before their first head flag (scan-then-propagate on pairs). ``out`` may be ``values``.
    """
    blocks = blocks_for(n, threads)
    seen = cuda.device_array(n, dtype=np.int32)
    bvals = cuda.device_array(blocks, dtype=np.float32)
    bheads = cuda.device_array(blocks, dtype=np.int32)
    steps = [Launch("segmented_scan_block", segmented_scan_block, blocks, threads,
                    (values, heads, out, seen, bvals, bheads))]
    if blocks > 1:
        steps += plan_segmented_scan(bvals, bheads, bvals, blocks, threads)
        steps.append(Launch("segmented_propagate", segmented_propagate, blocks, threads, (out, seen, bvals, threads)))
    return steps


def segmented_scan_reference(values, heads) -> np.ndarray:
    """NumPy specification: the inclusive sum restarts at every ``heads[i] != 0`` (a segment also starts at 0)."""
    v = np.asarray(values, dtype=np.float64)
    h = np.asarray(heads) != 0
    if v.size == 0:
        return v
    segment = np.cumsum(h) - (1 if h[0] else 0)  # segment number of every element
    total = np.cumsum(v)
    starts = np.flatnonzero(np.r_[True, segment[1:] != segment[:-1]])
    before = np.r_[0.0, total][starts]  # sum of everything before each segment
    return total - np.repeat(before, np.diff(np.r_[starts, v.size]))


def _check_segmented(values, heads) -> int:
    validate.array(values, "values", dtype=np.float32, ndim=1)
    validate.array(heads, "heads", ndim=1)
    if np.dtype(heads.dtype).kind not in "iub":
        raise ArrayArgumentError(f"heads has dtype {np.dtype(heads.dtype)}: pass integer or bool flags, e.g. int32 "
                                 "(nonzero = a segment starts here).")
    if heads.shape != values.shape:
        raise ArrayArgumentError(f"heads has shape {tuple(heads.shape)} and values {tuple(values.shape)}: one flag "
                                 "per value.")
    if values.shape[0] == 0:
        raise ArrayArgumentError("values is empty: pass at least one element.")
    return int(values.shape[0])


@dataclass
class SegmentedScan:
    """An inclusive segmented sum of float32 ``values``, restarting at every head flag; planned once, launchable often.

    The scan of pairs (flag, value) with the operator ``(f1, v1) + (f2, v2) = (f1 or f2, v2 if f2 else
    v1 + v2)``: Hillis-Steele in every block, the blocks' pairs scanned recursively, then propagated
    (:func:`plan_segmented_scan`), the same structure as the unsegmented ``Scan(x, "hillis_steele")``.

    Args:
        values: 1-D float32 array (NumPy: copied once; CuPy or Numba device array: used in place).
        heads: 1-D int32, uint8 or bool flags of the same length, nonzero where a segment starts.
        threads: threads per block, 1 to 1024 (default 256, 32 in the simulator).
    """

    values: object
    heads: object
    threads: int | None = None

    def __post_init__(self) -> None:
        self.n = _check_segmented(self.values, self.heads)
        self.threads = _threads_for("hillis_steele", self.threads)
        heads = self.heads
        if isinstance(heads, np.ndarray):
            heads = np.ascontiguousarray(heads, dtype=np.int32)
        elif np.dtype(heads.dtype) != np.dtype(np.int32):
            heads = heads.astype(np.int32)  # CuPy or a device array of another dtype
        self.d_values = to_device(self.values)
        self.d_heads = to_device(heads)
        self.out = cuda.device_array(self.n, dtype=np.float32)
        self.steps = plan_segmented_scan(self.d_values, self.d_heads, self.out, self.n, self.threads)

    def launch(self) -> None:
        """Enqueue the kernels (asynchronous)."""
        for step in self.steps:
            step()

    def result(self) -> np.ndarray:
        """The scan of the last launch, on the host."""
        return self.out.copy_to_host()


def segmented_scan(values, heads, threads: int | None = None) -> np.ndarray:
    """Inclusive segmented sum of float32 ``values`` by head flags ``heads``; returns NumPy (see :class:`SegmentedScan`)."""
    s = SegmentedScan(values, heads, threads)
    s.launch()
    return s.result()


def distribute(values, heads, threads: int | None = None) -> np.ndarray:
    """Copy the value at every segment's head to the whole segment (a segment also starts at element 0).

    The *distribute* primitive as a segmented scan: the non-head values are replaced by 0, so the
    running sum of each segment is its head's value.
    """
    _check_segmented(values, heads)
    v, h = to_host(values), np.asarray(to_host(heads)) != 0
    h[0] = True  # element 0 heads the first segment
    return segmented_scan(np.where(h, v, np.float32(0)).astype(np.float32), h, threads)


def distribute_reference(values, heads) -> np.ndarray:
    """NumPy specification of :func:`distribute`."""
    v = np.asarray(values, dtype=np.float32)
    h = np.asarray(heads) != 0
    starts = np.maximum.accumulate(np.where(h | (np.arange(v.size) == 0), np.arange(v.size), 0))
    return v[starts]


@cuda.jit
def spmv_gather_row_ends(row_ptr, scanned, y):
    """Segmented-scan SpMV, step 4: row ``r``'s sum is the scan at its last non-zero; an empty row gets 0.

    (The slide scans backwards and reads each row's first non-zero, ``row_ptr[r]``; scanning forwards
    and reading the last one is the same idea. An empty row has no non-zero of its own: reading
    ``scanned[row_ptr[r]]`` for it would return the next row's sum.)
    """
    r = cuda.grid(1)
    if r < y.size:
        start = row_ptr[r]
        end = row_ptr[r + 1]
        y[r] = scanned[end - 1] if end > start else float32(0)


@cuda.jit(device=True)
def merge_path_search(diagonal, ends, first, nnz_base, a_len, b_len):
    """How many row ends the first ``diagonal`` merge items hold (a binary search along a diagonal).

    Merge the list of row ends (``ends[first + 0 .. first + a_len)``, row ``i`` ends where row ``i+1``
    starts) with the list of non-zero indices ``nnz_base + 0 .. b_len - 1``, row ends first on ties.
    Walking that merged list, a thread finishes a row exactly when it meets the row's end. Any split
    of the merged list into equal pieces gives every thread the same amount of work (rows + non-zeros),
    however long or empty the rows are (Merrill & Garland, 2016, the same authors as the look-back).
    """
    lo = max(0, diagonal - b_len)
    hi = min(diagonal, a_len)
    while lo < hi:
        mid = (lo + hi) >> 1
        if ends[first + mid] <= nnz_base + diagonal - mid - 1:
            lo = mid + 1
        else:
            hi = mid
    return lo


@cuda.jit
def spmv_merge_partition(row_ptr, nnz, coords):
    """Merge-based SpMV, step 1: where tile ``t`` starts on the merge path: ``coords[t] = (rows, non-zeros)``."""
    t = cuda.grid(1)
    tiles = coords.shape[0]
    if t < tiles:
        n_rows = row_ptr.size - 1
        diagonal = min(t * MERGE_TILE, n_rows + nnz)
        i = merge_path_search(diagonal, row_ptr, 1, 0, n_rows, nnz)
        coords[t, 0] = i
        coords[t, 1] = diagonal - i


@cuda.jit(device=True)
def merge_stage_tile(row_ptr, col_idx, values, x, s_rows, s_prod, i0, i1, j0, j1):
    """Merge-based SpMV: the block stages its tile in shared memory (the caller synchronises after it).

    ``s_rows[k]`` = the start of row ``i0 + k`` for ``k = 0 .. i1 - i0 + 1`` (row ``r`` ends where row
    ``r + 1`` starts; past the last row, ``nnz``), and ``s_prod[k]`` = ``values[j0 + k] * x[col_idx[j0 + k]]``
    for the tile's non-zeros. Thread ``t`` takes items ``t``, ``t + MERGE_THREADS``, ...: a warp's loads
    are coalesced, and the fixed trip count lets the compiler unroll both loops.
    """
    tid = cuda.threadIdx.x
    n_rows = row_ptr.size - 1
    nnz = values.size
    for m in range(MERGE_ITEMS + 1):
        k = tid + m * MERGE_THREADS
        if k < i1 - i0 + 2:
            r = i0 + k
            s_rows[k] = row_ptr[r] if r <= n_rows else nnz
    for m in range(MERGE_ITEMS):
        k = tid + m * MERGE_THREADS
        if k < j1 - j0:
            s_prod[k] = values[j0 + k] * x[col_idx[j0 + k]]


@cuda.jit
def spmv_merge(row_ptr, col_idx, values, x, y, coords):
    """Merge-based SpMV, step 2: each block takes ``MERGE_TILE`` merge items (row ends + non-zeros).

    The block stages its products ``values[k] * x[col_idx[k]]`` (coalesced) and its rows' starts in
    shared memory; each thread finds its first item by :func:`merge_path_search` there and walks
    ``MERGE_ITEMS`` items: a non-zero adds its product, a row end writes the row's sum. A row that a
    thread saw whole is stored; a row split between threads (or tiles) is added with an atomic, so
    ``y`` must start at zero.
    """
    s_rows = cuda.shared.array(MERGE_ROWS, int32)
    s_prod = cuda.shared.array(MERGE_TILE, float32)
    tid = cuda.threadIdx.x
    b = cuda.blockIdx.x
    i0 = coords[b, 0]
    j0 = coords[b, 1]
    i1 = coords[b + 1, 0]
    j1 = coords[b + 1, 1]
    merge_stage_tile(row_ptr, col_idx, values, x, s_rows, s_prod, i0, i1, j0, j1)
    cuda.syncthreads()  # RAW: the tile's products and row starts are in shared memory before the walk
    length = (i1 - i0) + (j1 - j0)
    d = min(tid * MERGE_ITEMS, length)
    ti = merge_path_search(d, s_rows, 1, j0, i1 - i0, j1 - j0)
    i = i0 + ti
    j = j0 + d - ti
    whole = s_rows[ti] >= j  # this thread sees the current row from its start
    touched = False
    acc = float32(0)
    step = 0
    while step < MERGE_ITEMS and d + step < length:
        if j < s_rows[i - i0 + 1]:  # the next merge item is a non-zero of row i
            acc += s_prod[j - j0]
            j += 1
            touched = True
        else:  # the next merge item is the end of row i
            if whole:
                y[i] = acc
            else:
                cuda.atomic.add(y, i, acc)
            i += 1
            acc = float32(0)
            whole = True
            touched = False
        step += 1
    if touched:  # a row continues in the next thread: add this part
        cuda.atomic.add(y, i, acc)


@cuda.jit
def spmv_merge_combined(row_ptr, col_idx, values, x, y, coords):
    """Merge-based SpMV whose block combines the partial sums of a row before writing it.

    As :func:`spmv_merge`, but a row split between threads costs no atomic: each thread keeps its
    carry-out (the row it stops in, and that row's partial sum), the block runs an inclusive
    segmented scan of the carry-outs keyed by row (Hillis-Steele in shared memory; row ids never
    decrease along the block, so the keyed sum is associative), and thread ``t`` adds thread
    ``t - 1``'s scanned carry to the first row it ends. Only a row that starts in an earlier tile is
    added with an atomic, and the block adds its own carry-out with one: at most two atomics per
    block, however long the rows (Merrill & Garland, 2016). ``y`` must start at zero.
    """
    s_rows = cuda.shared.array(MERGE_ROWS, int32)
    s_prod = cuda.shared.array(MERGE_TILE, float32)
    s_key = cuda.shared.array((2, MERGE_THREADS), int32)
    s_val = cuda.shared.array((2, MERGE_THREADS), float32)
    tid = cuda.threadIdx.x
    b = cuda.blockIdx.x
    n_rows = y.size
    i0 = coords[b, 0]
    j0 = coords[b, 1]
    i1 = coords[b + 1, 0]
    j1 = coords[b + 1, 1]
    merge_stage_tile(row_ptr, col_idx, values, x, s_rows, s_prod, i0, i1, j0, j1)
    cuda.syncthreads()  # RAW: the tile's products and row starts are in shared memory before the walk
    length = (i1 - i0) + (j1 - j0)
    d = min(tid * MERGE_ITEMS, length)
    ti = merge_path_search(d, s_rows, 1, j0, i1 - i0, j1 - j0)
    i = i0 + ti
    j = j0 + d - ti
    # walk 1: rows that end in this thread, except the first, are complete; the first waits for the carry
    first_row = -1
    first_val = float32(0)
    acc = float32(0)
    step = 0
    while step < MERGE_ITEMS and d + step < length:
        if j < s_rows[i - i0 + 1]:  # a non-zero of row i
            acc += s_prod[j - j0]
            j += 1
        else:  # the end of row i
            if first_row < 0:
                first_row = i
                first_val = acc
            else:  # started in this thread (only the first row can start before it): complete
                y[i] = acc
            i += 1
            acc = float32(0)
        step += 1
    s_key[0, tid] = i  # carry-out: the row this thread stops in, and its partial sum
    s_val[0, tid] = acc
    cuda.syncthreads()  # RAW: every carry-out is in shared memory before the scan reads it
    src = 0
    offset = 1
    while offset < MERGE_THREADS:
        key = s_key[src, tid]
        v = s_val[src, tid]
        if tid >= offset and s_key[src, tid - offset] == key:
            v += s_val[src, tid - offset]
        s_key[1 - src, tid] = key
        s_val[1 - src, tid] = v
        cuda.syncthreads()  # RAW: this step is written before the next reads it (WAR: the other buffer)
        src = 1 - src
        offset *= 2
    if first_row >= 0:
        v = first_val
        if tid > 0 and s_key[src, tid - 1] == first_row:
            v += s_val[src, tid - 1]
        if s_rows[first_row - i0] < j0:  # the row started in an earlier tile, which added its part
            cuda.atomic.add(y, first_row, v)
        else:
            y[first_row] = v
    if tid == MERGE_THREADS - 1:  # the block's carry-out: a row that continues in the next tile
        key = s_key[src, tid]
        if key < n_rows and s_rows[key - i0] < j1:
            cuda.atomic.add(y, key, s_val[src, tid])


@cuda.jit
def fill_zero_f32(y):
    """``y[:] = 0`` (float32) on the device."""
    i = cuda.grid(1)
    if i < y.size:
        y[i] = float32(0)


class SpMV:
    """``y = A @ x`` for a CSR matrix with one of the chapter's kernels, planned once (buffers allocated).

    Args:
        a: a :class:`CSR` matrix (or ``(row_ptr, col_idx, values, n_cols)``).
        x: float32 vector of ``n_cols`` values.
        method: ``"scalar"``, ``"warp_per_row"`` (GPU only), ``"segmented_scan"`` or ``"merge"``.
        threads: threads per block of the scalar, warp-per-row and segmented-scan kernels.

    Raises:
        ArrayArgumentError: an invalid CSR matrix (e.g. ``row_ptr`` without its last entry) or ``x`` of the wrong size.
    """

    def __init__(self, a, x, method: str = "merge", threads: int | None = None) -> None:
        if not isinstance(a, CSR):
            try:
                row_ptr, col_idx, values, n_cols = a
            except (TypeError, ValueError):
                raise ArgumentError("a must be a CSR matrix or a tuple (row_ptr, col_idx, values, n_cols)") from None
            a = CSR(row_ptr, col_idx, values, validate.integer(n_cols, "n_cols", minimum=0))
        check_csr(a.row_ptr, a.col_idx, a.values, a.n_cols)
        validate.array(x, "x", dtype=np.float32, shape=(a.n_cols,))
        self.method = validate.choice(method, "method", tuple(SPMV_METHODS))
        needs = SPMV_METHODS[self.method][1]
        if needs:
            backend.require_gpu(f"the {SPMV_METHODS[self.method][0]} SpMV kernel",
                                because=f"uses {needs}, which Numba's CUDA simulator does not have",
                                instead="Its measurements are in lh.load_reference('ch10_spmv').")
        self.a = a
        self.threads = _threads_for("warp_shuffle" if self.method == "warp_per_row" else "hillis_steele", threads)
        self.n_rows, self.nnz = a.n_rows, a.nnz
        self.d_row_ptr, self.d_col, self.d_val = (to_device(a.row_ptr), to_device(a.col_idx), to_device(a.values))
        self.d_x = to_device(x)
        self.y = cuda.device_array(max(self.n_rows, 1), dtype=np.float32)[:self.n_rows]
        self.steps: list[Launch] = []
        if self.n_rows == 0:
            return
        t = self.threads
        row_blocks = blocks_for(self.n_rows, t)
        args = (self.d_row_ptr, self.d_col, self.d_val, self.d_x, self.y)
        if self.method == "scalar":
            self.steps.append(Launch("spmv_csr_scalar", spmv_csr_scalar, row_blocks, t, args))
        elif self.method == "warp_per_row":
            self.steps.append(Launch("spmv_csr_warp_per_row", spmv_csr_warp_per_row,
                                     blocks_for(self.n_rows * WARP, t), t, args))
        elif self.method in ("merge", "merge_combined"):
            tiles = tiles_for(self.n_rows + self.nnz, MERGE_TILE)
            coords = cuda.device_array((tiles + 1, 2), dtype=np.int32)
            kernel = spmv_merge if self.method == "merge" else spmv_merge_combined
            self.steps += [
                Launch("fill_zero_f32", fill_zero_f32, row_blocks, t, (self.y,)),
                Launch("spmv_merge_partition", spmv_merge_partition, blocks_for(tiles + 1, t), t,
                       (self.d_row_ptr, self.nnz, coords)),
                Launch("spmv_" + self.method, kernel, tiles, MERGE_THREADS, args + (coords,)),
            ]
        else:
            self._plan_segmented(t, row_blocks)

    def _plan_segmented(self, t: int, row_blocks: int) -> None:
        if self.nnz == 0:
            self.steps.append(Launch("fill_zero_f32", fill_zero_f32, row_blocks, t, (self.y,)))
            return
        products = cuda.device_array(self.nnz, dtype=np.float32)
        heads = cuda.device_array(self.nnz, dtype=np.int32)
        nz_blocks = blocks_for(self.nnz, t)
        self.steps += [Launch("spmv_products", spmv_products, nz_blocks, t, (self.d_col, self.d_val, self.d_x,
                                                                           products, heads)),
                       Launch("spmv_mark_heads", spmv_mark_heads, row_blocks, t, (self.d_row_ptr, heads))]
        self._plan_segmented_scan(products, heads, self.nnz, t)
        self.steps.append(Launch("spmv_gather_row_ends", spmv_gather_row_ends, row_blocks, t,
                                 (self.d_row_ptr, products, self.y)))

    def _plan_segmented_scan(self, vals, heads, n: int, t: int) -> None:
        """In place: ``vals`` becomes its segmented inclusive scan (:func:`plan_segmented_scan`)."""
        self.steps += plan_segmented_scan(vals, heads, vals, n, t)

    @property
    def nbytes(self) -> int:
        """Bytes an SpMV must move (:func:`spmv_bytes`)."""
        return spmv_bytes(self.n_rows, self.a.n_cols, self.nnz)

    def launch(self) -> None:
        """Enqueue the kernels (asynchronous)."""
        for step in self.steps:
            step()

    def result(self) -> np.ndarray:
        """``y`` of the last launch, on the host."""
        if self.n_rows == 0:
            return np.zeros(0, np.float32)
        return self.y.copy_to_host()

    def __call__(self) -> np.ndarray:
        self.launch()
        return self.result()


def spmv(a, x, method: str = "merge", threads: int | None = None) -> np.ndarray:
    """``A @ x`` for a CSR matrix ``a`` and a float32 vector ``x`` with one of the chapter's kernels."""
    return SpMV(a, x, method, threads)()
