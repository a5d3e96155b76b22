"""Chapter "Stencils, halos and connected components": counting models (no GPU).

* :func:`tile_1d`: what a 1D shared tile with a halo of radius R costs a block of B threads: words
  loaded (B + 2R), loads per output, and the 2R + 1 reads per output of the kernel without a tile.
* :func:`tile_2d`: the same for a 2D tile of a 5-point stencil (halo of 1, no corners), and how many
  32-byte memory sectors its loads touch: the halo columns ("vertical halo") cost one sector per
  row for 4 useful bytes.
* :func:`jacobi_roofline`: intensity of a Jacobi step (4 flops per 8 bytes) and what the roofline
  says it can reach given a bandwidth and a compute peak.
* :func:`propagation_steps_bound`: the steps label propagation needs on a one-pixel-wide path.
* :func:`stencil3d_loads`: loads and bytes per point of the 3D 7-point stencil, naive against marching planes.
* :func:`union_find_work`: the parent reads union-find makes on an image when its threads run one after
  another in launch order (a host model of the very code of ``kernels.stencil_labelling``), with path halving or
  without compression: a deterministic work count to set against propagation's steps.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .. import validate

#: Bytes of one memory sector (the unit a load from device memory moves, NVIDIA's *CUDA C++ Best Practices Guide*).
SECTOR_BYTES = 32
FLOAT_BYTES = 4


def tile_1d(threads: int, radius: int) -> dict:
    """Loads of a block of ``threads`` threads computing a 1D stencil of ``radius``, with and without a tile.

    Returns ``words`` (tile size, B + 2R), ``loads_per_output`` ((B + 2R) / B), ``halo_overhead``
    (2R / B: the fraction of extra loads) and ``global_reads_per_output`` (2R + 1: every thread
    reads its whole window from device memory without a tile).
    """
    threads = validate.integer(threads, "threads", minimum=1, maximum=1024)
    radius = validate.integer(radius, "radius", minimum=0)
    words = threads + 2 * radius
    return {"threads": threads, "radius": radius, "words": words, "loads_per_output": words / threads,
            "halo_overhead": 2 * radius / threads, "global_reads_per_output": 2 * radius + 1}


def tile_1d_table(threads=(32, 64, 128, 256, 1024), radii=(1, 3, 8, 16)) -> pd.DataFrame:
    """:func:`tile_1d` for every combination, one row each."""
    return pd.DataFrame([tile_1d(t, r) for t in threads for r in radii])


def _row_sectors(first_byte: int, nbytes: int) -> int:
    """Sectors touched by ``nbytes`` contiguous bytes starting at ``first_byte``."""
    if nbytes <= 0:
        return 0
    return (first_byte + nbytes - 1) // SECTOR_BYTES - first_byte // SECTOR_BYTES + 1


def tile_2d(bx: int, by: int, x0: int = 32) -> dict:
    """The shared tile of a 5-point stencil for a block of ``bx x by`` threads (halo of 1, corners not loaded).

    ``x0`` is the column of the block's first point (a multiple of 32 when blocks are 32 wide, so
    its rows start on a sector boundary). Counts: ``useful`` (the block's own points),
    ``halo_words`` (2 bx + 2 by), ``loads_per_point`` and the sectors the loads touch: the
    block's rows and the halo rows above and below (``row_sectors``, contiguous), and the halo
    columns left and right (``column_sectors``: one sector per row each, for 4 useful bytes).
    ``sector_efficiency`` is useful bytes loaded / sector bytes moved.
    """
    bx = validate.integer(bx, "bx", minimum=1, maximum=1024)
    by = validate.integer(by, "by", minimum=1, maximum=1024)
    x0 = validate.integer(x0, "x0", minimum=1)
    row = _row_sectors(x0 * FLOAT_BYTES, bx * FLOAT_BYTES)
    row_sectors = (by + 2) * row
    column_sectors = 2 * by
    words = bx * by + 2 * bx + 2 * by
    return {"bx": bx, "by": by, "useful": bx * by, "halo_words": 2 * bx + 2 * by,
            "loads_per_point": words / (bx * by), "row_sectors": row_sectors, "column_sectors": column_sectors,
            "sector_efficiency": words * FLOAT_BYTES / ((row_sectors + column_sectors) * SECTOR_BYTES)}


def tile_2d_table(blocks=((32, 8), (32, 4), (16, 16), (32, 32), (64, 4), (128, 2))) -> pd.DataFrame:
    """:func:`tile_2d` for several block shapes."""
    return pd.DataFrame([tile_2d(bx, by) for bx, by in blocks])


def jacobi_roofline(bandwidth_gbs: float, peak_gflops: float, flops_per_point: int = 4,
                    bytes_per_point: int = 8) -> dict:
    """The roofline of a Jacobi step: intensity, the machine's balance, and the attainable rates.

    A point costs ``flops_per_point`` (3 additions, 1 multiplication) and, at best,
    ``bytes_per_point`` of memory traffic (read once, written once): 0.5 flop/byte. Attainable
    GFLOP/s = min(bandwidth x intensity, peak); points per second = bandwidth / bytes per point.
    """
    bandwidth_gbs = validate.number(bandwidth_gbs, "bandwidth_gbs", minimum=0.0)
    peak_gflops = validate.number(peak_gflops, "peak_gflops", minimum=0.0)
    if bandwidth_gbs <= 0 or peak_gflops <= 0:
        raise validate.ArgumentError("bandwidth_gbs and peak_gflops must be positive (a roofline needs both roofs).")
    intensity = flops_per_point / bytes_per_point
    balance = peak_gflops / bandwidth_gbs
    attainable = min(bandwidth_gbs * intensity, peak_gflops)
    return {"intensity": intensity, "balance": balance, "attainable_gflops": attainable,
            "fraction_of_peak": attainable / peak_gflops, "gpoints_s": bandwidth_gbs / bytes_per_point,
            "bound": "memory" if intensity < balance else "compute"}


def propagation_steps_bound(path_pixels: int) -> int:
    """Steps label propagation takes on a one-pixel-wide path of ``path_pixels`` pixels, labelled from one end.

    The smallest label moves one pixel per step: ``path_pixels - 1`` steps to reach the other end,
    plus the one step that changes nothing and stops the loop. Union-find needs 3 launches.
    """
    path_pixels = validate.integer(path_pixels, "path_pixels", minimum=1)
    return path_pixels


def stencil3d_loads(bx: int, by: int) -> dict:
    """Loads per point of one 3D 7-point step, one thread per point (naive) or marching planes on a ``bx x by`` block.

    ``naive_loads``: 7 (every neighbour a load; the caches decide how many reach DRAM: from 4 bytes per
    point if every reuse hits, to 28 if none does). ``marching_loads``: 1 (the next plane's value, the
    z-neighbours stay in registers) + the tile's halo, ``2 (bx + by) / (bx by)`` per point (no corners).
    ``marching_dram_bytes``: the words marching reads and writes per point (``4 * marching_loads + 4``),
    counted as if memory moved single words; ``marching_sector_bytes``: the same traffic in the 32-byte
    sectors memory really moves, blocks aligned to 128 bytes: the halo rows are contiguous, but every
    load of a halo column fetches a sector of its own for 4 useful bytes, so narrow blocks pay most;
    ``ideal_bytes``: 8 (read once, written once), what a copy moves.
    """
    bx = validate.integer(bx, "bx", minimum=1, maximum=1024)
    by = validate.integer(by, "by", minimum=1, maximum=1024)
    halo = 2 * (bx + by) / (bx * by)
    halo_row_bytes = 2 * _row_sectors(0, bx * FLOAT_BYTES) * SECTOR_BYTES  # above and below: contiguous
    halo_column_bytes = 2 * by * SECTOR_BYTES  # left and right: one sector per row, 4 bytes of it used
    return {"bx": bx, "by": by, "naive_loads": 7, "naive_dram_bytes_worst": 7 * FLOAT_BYTES + FLOAT_BYTES,
            "marching_loads": 1 + halo, "marching_dram_bytes": FLOAT_BYTES * (1 + halo) + FLOAT_BYTES,
            "marching_sector_bytes": 2 * FLOAT_BYTES + (halo_row_bytes + halo_column_bytes) / (bx * by),
            "ideal_bytes": 2 * FLOAT_BYTES}


def stencil3d_loads_table(blocks=((32, 8), (32, 4), (16, 16), (64, 4), (8, 8))) -> pd.DataFrame:
    """:func:`stencil3d_loads` for several blocks (x, y)."""
    return pd.DataFrame([stencil3d_loads(bx, by) for bx, by in blocks])


def _find(parent: list, a: int, halve: bool, reads: list) -> int:
    """``find_root`` (``halve``) or ``find_root_plain`` of ``kernels.stencil_labelling`` on a Python list, counting
    reads."""
    p = parent[a]
    reads[0] += 1
    while p != a:
        if halve:
            gp = parent[p]
            reads[0] += 1
            if gp != p:
                parent[a] = gp  # the compare-and-swap always succeeds: nothing runs concurrently here
            a = gp
        else:
            a = p
        p = parent[a]
        reads[0] += 1
    return a


def _union(parent: list, a: int, b: int, halve: bool, reads: list) -> None:
    """``union`` of ``kernels.stencil_labelling``, one thread alone (the atomic minimum is a plain minimum)."""
    a = _find(parent, a, halve, reads)
    b = _find(parent, b, halve, reads)
    if a != b:
        lo, hi = min(a, b), max(a, b)
        parent[hi] = lo


def union_find_work(mask, compress: bool = True) -> dict:
    """Parent reads of union-find (init, merge, compress) on ``mask``, threads run one at a time in launch order.

    The model runs the merge and compress kernels' code for every foreground pixel in raster order
    (the order of thread indices), with ``find_root`` (path halving, ``compress=True``) or
    ``find_root_plain``. A GPU interleaves the threads, so its chains differ; this is one schedule,
    deterministic, that shows what compression does to the work, not a GPU's exact count.

    Returns ``foreground``, ``merge_reads``, ``compress_reads``, ``reads_per_pixel`` (both kernels, per
    foreground pixel) and ``max_find`` (the most reads one find made).
    """
    m = np.asarray(mask) != 0
    if m.ndim != 2:
        raise ValueError(f"mask must be 2-D, got shape {m.shape}")
    ny, nx = m.shape
    parent = list(range(ny * nx))
    flat = m.ravel().tolist()
    reads = [0]
    longest = 0
    for me in range(ny * nx):
        if not flat[me]:
            continue
        j = me % nx
        before = reads[0]
        if j > 0 and flat[me - 1]:
            _union(parent, me, me - 1, compress, reads)
        if me >= nx and flat[me - nx]:
            _union(parent, me, me - nx, compress, reads)
        longest = max(longest, reads[0] - before)
    merge_reads = reads[0]
    for me in range(ny * nx):
        if flat[me]:
            before = reads[0]
            _find(parent, me, compress, reads)
            longest = max(longest, reads[0] - before)
    fg = int(m.sum())
    return {"foreground": fg, "merge_reads": merge_reads, "compress_reads": reads[0] - merge_reads,
            "reads_per_pixel": reads[0] / fg if fg else 0.0, "max_find": longest}


def halo_fraction_curve(threads: int, radii) -> list[float]:
    """Extra loads of a 1D tile, 2R/B, for each radius: the halo's cost grows with R, falls with B."""
    threads = validate.integer(threads, "threads", minimum=1, maximum=1024)
    return [2 * validate.integer(r, "radius", minimum=0) / threads for r in radii]


__all__ = ["FLOAT_BYTES", "SECTOR_BYTES", "halo_fraction_curve", "jacobi_roofline", "propagation_steps_bound",
           "stencil3d_loads", "stencil3d_loads_table", "tile_1d", "tile_1d_table", "tile_2d", "tile_2d_table",
           "union_find_work"]
