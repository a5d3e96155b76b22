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
:func:`draw_tiling` / :func:`draw_roofline` draw both.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .. import validate


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
    return m * k * math.ceil(n / bn) + k * n * math.ceil(m / bm)


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
    return math.ceil(k / tile)


def tile_phase(m: int, k: int, n: int, tile: int, block_row: int, block_col: int, phase: int) -> Phase:
    """The tiles block ``(block_row, block_col)`` copies into shared memory in phase ``phase``.

    The block computes ``C[block_row*tile : ..., block_col*tile : ...]``; in phase ``p`` it loads
    ``A[rows, p*tile : (p+1)*tile]`` and ``B[p*tile : (p+1)*tile, cols]``, clipped to the matrices.
    """
    m, k, n = (validate.integer(v, name, minimum=1) for name, v in zip("mkn", (m, k, n)))
    tile = validate.integer(tile, "tile", minimum=1)
    rows_of_blocks, cols_of_blocks, count = math.ceil(m / tile), math.ceil(n / tile), phases(k, tile)
    for name, v, hi in (("block_row", block_row, rows_of_blocks), ("block_col", block_col, cols_of_blocks),
                        ("phase", phase, count)):
        if not 0 <= v < hi:
            raise ValueError(f"{name} must lie in [0, {hi}) for m={m}, k={k}, n={n} and tile {tile}, got {v}")
    r0, c0, k0 = block_row * tile, block_col * tile, phase * tile
    rows, cols, ks = (r0, min(r0 + tile, m)), (c0, min(c0 + tile, n)), (k0, min(k0 + tile, k))
    return Phase(block_row, block_col, phase, count, a_rows=rows, a_cols=ks, b_rows=ks, b_cols=cols)


def draw_tiling(ax, m: int, k: int, n: int, tile: int, block_row: int, block_col: int, phase: int) -> Phase:
    """Draw ``A`` (left), ``B`` (top) and ``C`` (bottom right) cell by cell, with what a block uses.

    Dark: the tiles of ``A`` and ``B`` in shared memory during ``phase``; light: tiles the block
    loaded in earlier phases; outlined in ``C``: the block's outputs. The title counts the
    global loads of the whole grid with and without tiles.
    """
    from matplotlib.patches import Rectangle

    ph = tile_phase(m, k, n, tile, block_row, block_col, phase)
    gap = 1.0
    # coordinates: x to the right, y downwards (inverted axis); A at x in [0, k), C at x in [k+gap, k+gap+n)
    a_x, c_x, b_y, c_y = 0.0, k + gap, 0.0, k + gap

    def grid(x0, y0, rows, cols, label):
        ax.add_patch(Rectangle((x0, y0), cols, rows, fill=False, lw=1.2, ec="0.2"))
        for r in range(1, rows):
            ax.plot([x0, x0 + cols], [y0 + r, y0 + r], lw=0.3, color="0.75")
        for c in range(1, cols):
            ax.plot([x0 + c, x0 + c], [y0, y0 + rows], lw=0.3, color="0.75")
        ax.text(x0 + cols / 2, y0 - 0.3, label, ha="center", va="bottom", fontsize=9)

    def shade(x0, y0, rows, cols, color, alpha):
        ax.add_patch(Rectangle((x0 + cols[0], y0 + rows[0]), cols[1] - cols[0], rows[1] - rows[0],
                               color=color, alpha=alpha, lw=0))

    grid(a_x, c_y, m, k, f"A ({m} x {k})")
    grid(c_x, b_y, k, n, f"B ({k} x {n})")
    grid(c_x, c_y, m, n, f"C ({m} x {n})")
    for earlier in range(phase):
        prev = tile_phase(m, k, n, tile, block_row, block_col, earlier)
        shade(a_x, c_y, prev.a_rows, prev.a_cols, "C0", 0.18)
        shade(c_x, b_y, prev.b_rows, prev.b_cols, "C1", 0.18)
    shade(a_x, c_y, ph.a_rows, ph.a_cols, "C0", 0.75)
    shade(c_x, b_y, ph.b_rows, ph.b_cols, "C1", 0.75)
    shade(c_x, c_y, ph.a_rows, ph.b_cols, "C2", 0.25 + 0.6 * (phase + 1) / ph.phases)
    ax.add_patch(Rectangle((c_x + ph.b_cols[0], c_y + ph.a_rows[0]), ph.b_cols[1] - ph.b_cols[0],
                           ph.a_rows[1] - ph.a_rows[0], fill=False, lw=2, ec="C3"))
    ax.set_xlim(-0.5, c_x + n + 0.5)
    ax.set_ylim(c_y + m + 0.5, -1.5)
    ax.set_aspect("equal")
    ax.axis("off")
    naive, tiled = naive_loads(m, k, n), tiled_loads(m, k, n, tile)
    ax.set_title(f"block ({block_row}, {block_col}), phase {phase + 1} of {ph.phases}: {ph.a_elements} + "
                 f"{ph.b_elements} elements loaded, {ph.multiply_adds} multiply-adds\n"
                 f"whole grid: {naive:,} global loads naive, {tiled:,} tiled ({naive / tiled:.1f}x fewer)",
                 fontsize=9)
    return ph


def draw_roofline(ax, bandwidth_gbs: float, peak_gflops: float, points: dict[str, tuple[float, float]] | None = None,
                  *, label: str = "", intensity_range: tuple[float, float] = (0.05, 200.0)) -> None:
    """Draw ``min(B I, P)`` on log-log axes and mark ``points``: name -> (intensity, GFLOP/s).

    With no measured ceilings (NaN), the axes say so instead.
    """
    if not (np.isfinite(bandwidth_gbs) and np.isfinite(peak_gflops)):
        ax.text(0.5, 0.5, "no measured ceilings in the reference data yet", ha="center", va="center",
                transform=ax.transAxes, color="0.4")
        ax.set_axis_off()
        return
    xs = np.geomspace(*intensity_range, 200)
    ax.plot(xs, attainable_gflops(xs, bandwidth_gbs, peak_gflops), color="0.2", lw=1.5,
            label=label or f"roofline: {bandwidth_gbs:,.0f} GB/s, {peak_gflops:,.0f} GFLOP/s")
    ridge = ridge_point(bandwidth_gbs, peak_gflops)
    ax.axvline(ridge, color="0.6", lw=0.8, ls=":")
    ax.text(ridge, peak_gflops * 1.15, f"ridge {ridge:.1f} flop/B", ha="center", fontsize=8, color="0.4")
    for i, (name, (x, y)) in enumerate((points or {}).items()):
        if np.isfinite(x) and np.isfinite(y):
            ax.plot([x], [y], "o", color=f"C{i % 10}", label=name)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (flop per byte of global-memory traffic)")
    ax.set_ylabel("GFLOP/s")
    ax.grid(True, which="both", alpha=0.25)
    ax.legend(fontsize=7, loc="lower right")


def draw_sweep(ax, table, *, tile: int = 16, label: str = "", live=None, yscale: str = "log") -> None:
    """GFLOP/s against ``n`` for every kernel of a sweep table (the tiled kernel only with tile ``tile``).

    ``table`` is reference data (dashed lines, labelled ``label``); ``live``, if given, a sweep measured
    here (solid). Rows without a timing are left out; with none at all the axes say so.
    """
    def usable(t):
        if t is None:
            return None
        t = t[t["gflops"].notna()]
        keep = (t["variant"] != "tiled") | (t["tile"] == tile)
        return t[keep] if len(t) else None

    styles = {"cublas_fp32": dict(color="k", lw=2), "cublas_fp64": dict(color="0.5", lw=2)}
    order = list(dict.fromkeys(table["kernel"])) if table is not None else []
    drawn = False
    for data, style, suffix in ((usable(table), "--", ""), (usable(live), "-", " (this machine)")):
        if data is None:
            continue
        for i, name in enumerate(order):
            part = data[data["kernel"] == name].sort_values("n")
            if not len(part):
                continue
            kw = dict(styles.get(name, dict(color=f"C{i % 10}")))
            ax.plot(part["n"], part["gflops"], ls=style, marker="o", markersize=3, label=name + suffix, **kw)
            drawn = True
    if not drawn:
        ax.text(0.5, 0.5, "no timings in this table yet", ha="center", va="center", transform=ax.transAxes,
                color="0.4")
    elif label:
        ax.text(0.01, 0.99, f"dashed: {label}" + ("; solid: this machine" if usable(live) is not None else ""),
                transform=ax.transAxes, va="top", fontsize=8, color="0.3")
    ax.set_xscale("log", base=2)
    ax.set_yscale(yscale)
    ax.set_xlabel("n (n x n matrices)")
    ax.set_ylabel("GFLOP/s")
    ax.grid(True, which="both", alpha=0.25)
    if drawn:
        ax.legend(fontsize=7, ncol=2, loc="lower right")
