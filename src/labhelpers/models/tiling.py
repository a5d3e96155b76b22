"""Counting the global-memory traffic of matrix multiplication, with and without tiles.

``C = A @ B`` with ``A`` of shape ``m x k`` and ``B`` of shape ``k x n`` costs ``2 m k n`` flops (one
multiply and one add per term of every dot product). How many bytes it moves depends on the kernel:

* naive, one thread per element of ``C``: every thread reads a row of ``A`` and a column of ``B``,
  so ``2 m n k`` loads, 8 bytes per multiply-add in float32: 0.25 flop per byte;
* tiled, a block computing a ``bm x bn`` tile of ``C``: the block reads its ``bm`` rows of ``A`` and
  ``bn`` columns of ``B`` once, so every element of ``A`` is loaded once per block *column* and
  every element of ``B`` once per block *row*: ``m k ceil(n / bn) + k n ceil(m / bm)`` loads, about
  ``bm`` (for square tiles) times fewer;
* the minimum: read ``A`` and ``B`` once and write ``C`` once, ``mk + kn + mn`` elements, which for
  ``n x n`` matrices gives ``2 n^3 / (3 n^2)``, an intensity that grows with ``n``.

:func:`tile_phase` says which elements a block loads at each phase (the chapter animates it),
:func:`attainable_gflops` is the roofline ``min(B I, P)`` the chapter places the kernels on, and
and :mod:`labhelpers.figures.matmul` draws both.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import validate
from ..launch import tiles_for


def matmul_flops(m: int, k: int, n: int) -> int:
    """Floating-point operations of ``C = A @ B``: ``2 m k n`` (a multiply and an add per term)."""
    m, k, n = (validate.integer(v, name, minimum=1) for name, v in zip("mkn", (m, k, n)))
    return 2 * m * k * n


def naive_loads(m: int, k: int, n: int) -> int:
    """Elements read from global memory by the one-thread-per-output kernel: ``2 m n k``."""
    m, k, n = (validate.integer(v, name, minimum=1) for name, v in zip("mkn", (m, k, n)))
    return 2 * m * n * k


def tiled_loads(m: int, k: int, n: int, bm: int, bn: int | None = None) -> int:
    """Elements read from global memory when each block computes a ``bm x bn`` tile of ``C``.

    Each block reads its rows of ``A`` (``bm x k``, fewer at the bottom edge) and its columns of
    ``B`` (``k x bn``, fewer at the right edge) once; elements outside the matrices are not read
    (the kernels store zeros for them). There are ``ceil(n / bn)`` block columns reading all of
    ``A`` and ``ceil(m / bm)`` block rows reading all of ``B``.
    """
    m, k, n = (validate.integer(v, name, minimum=1) for name, v in zip("mkn", (m, k, n)))
    bn = bm if bn is None else bn
    bm = validate.integer(bm, "bm", minimum=1)
    bn = validate.integer(bn, "bn", minimum=1)
    return m * k * tiles_for(n, bn) + k * n * tiles_for(m, bm)


def minimum_loads(m: int, k: int, n: int) -> int:
    """Elements of ``A`` and ``B``: what any kernel must read at least once."""
    m, k, n = (validate.integer(v, name, minimum=1) for name, v in zip("mkn", (m, k, n)))
    return m * k + k * n


def reuse_factor(m: int, k: int, n: int, bm: int, bn: int | None = None) -> float:
    """How many times fewer global loads the tiled kernel does than the naive one (about ``bm`` for square tiles)."""
    return naive_loads(m, k, n) / tiled_loads(m, k, n, bm, bn)


def intensity(flops: float, nbytes: float) -> float:
    """Arithmetic intensity: flops per byte moved."""
    if nbytes <= 0:
        raise ValueError(f"bytes moved must be positive, got {nbytes}")
    return flops / nbytes


def kernel_intensity(m: int, k: int, n: int, bm: int | None = None, bn: int | None = None,
                     itemsize: int = 4) -> float:
    """Flops per byte of global-memory traffic of a kernel: loads of ``A`` and ``B`` plus the store of ``C``.

    ``bm=None`` is the naive kernel (0.25 flop/byte in float32 for large ``k``); otherwise a kernel
    whose blocks compute ``bm x bn`` tiles of ``C``. This counts requests to the memory system: the
    L2 cache can serve some of them, so the DRAM traffic may be lower still.
    """
    loads = naive_loads(m, k, n) if bm is None else tiled_loads(m, k, n, bm, bn)
    return intensity(matmul_flops(m, k, n), itemsize * (loads + m * n))


def ideal_intensity(n: int, itemsize: int = 4) -> float:
    """Intensity of an ``n x n`` product that moves each matrix exactly once: ``2 n^3 / (3 n^2 itemsize)``."""
    return intensity(matmul_flops(n, n, n), itemsize * 3 * n * n)


def attainable_gflops(intensity_: float | np.ndarray, bandwidth_gbs: float, peak_gflops: float):
    """The roofline: ``min(B * I, P)`` GFLOP/s for intensity ``I`` (flop/byte), bandwidth ``B`` (GB/s), peak ``P``."""
    if bandwidth_gbs <= 0 or peak_gflops <= 0:
        raise ValueError(f"bandwidth and peak must be positive, got {bandwidth_gbs} and {peak_gflops}")
    return np.minimum(np.asarray(intensity_, dtype=float) * bandwidth_gbs, peak_gflops)


def ridge_point(bandwidth_gbs: float, peak_gflops: float) -> float:
    """The intensity where the roofline bends: ``P / B`` flop/byte. Below it a kernel is memory-bound."""
    if bandwidth_gbs <= 0 or peak_gflops <= 0:
        raise ValueError(f"bandwidth and peak must be positive, got {bandwidth_gbs} and {peak_gflops}")
    return peak_gflops / bandwidth_gbs


@dataclass(frozen=True)
class Phase:
    """What one block loads in one phase of the tiled kernel (half-open index ranges, clipped to the matrices)."""

    block_row: int
    block_col: int
    phase: int
    phases: int
    a_rows: tuple[int, int]
    a_cols: tuple[int, int]
    b_rows: tuple[int, int]
    b_cols: tuple[int, int]

    @property
    def a_elements(self) -> int:
        """Elements of ``A`` this phase brings into shared memory."""
        return (self.a_rows[1] - self.a_rows[0]) * (self.a_cols[1] - self.a_cols[0])

    @property
    def b_elements(self) -> int:
        """Elements of ``B`` this phase brings into shared memory."""
        return (self.b_rows[1] - self.b_rows[0]) * (self.b_cols[1] - self.b_cols[0])

    @property
    def multiply_adds(self) -> int:
        """Multiply-adds the block does with them: each output of the tile, times the slice of k."""
        return (self.a_rows[1] - self.a_rows[0]) * (self.b_cols[1] - self.b_cols[0]) * (self.a_cols[1] - self.a_cols[0])


def phases(k: int, tile: int) -> int:
    """Phases of the tiled kernel: ``ceil(k / tile)``."""
    k = validate.integer(k, "k", minimum=1)
    tile = validate.integer(tile, "tile", minimum=1)
    return tiles_for(k, tile)


def tile_phase(m: int, k: int, n: int, tile: int, block_row: int, block_col: int, phase: int) -> Phase:
    """The tiles block ``(block_row, block_col)`` copies into shared memory in phase ``phase``.

    The block computes ``C[block_row*tile : ..., block_col*tile : ...]``; in phase ``p`` it loads
    ``A[rows, p*tile : (p+1)*tile]`` and ``B[p*tile : (p+1)*tile, cols]``, clipped to the matrices.
    """
    m, k, n = (validate.integer(v, name, minimum=1) for name, v in zip("mkn", (m, k, n)))
    tile = validate.integer(tile, "tile", minimum=1)
    rows_of_blocks, cols_of_blocks, count = tiles_for(m, tile), tiles_for(n, tile), phases(k, tile)
    for name, v, hi in (("block_row", block_row, rows_of_blocks), ("block_col", block_col, cols_of_blocks),
                        ("phase", phase, count)):
        if not 0 <= v < hi:
            raise ValueError(f"{name} must lie in [0, {hi}) for m={m}, k={k}, n={n} and tile {tile}, got {v}")
    r0, c0, k0 = block_row * tile, block_col * tile, phase * tile
    rows, cols, ks = (r0, min(r0 + tile, m)), (c0, min(c0 + tile, n)), (k0, min(k0 + tile, k))
    return Phase(block_row, block_col, phase, count, a_rows=rows, a_cols=ks, b_rows=ks, b_cols=cols)
