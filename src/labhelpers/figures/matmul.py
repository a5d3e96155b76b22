"""Chapter 5's figures (matrix multiplication): the tiles a block loads, the CPU loop orders, the GPU sweep and
the kernels on the roofline.

Static figures: ``plot_x(table..., *, ax=None, label=...) -> Figure``; widget draw functions: ``draw_x(ax,
**params) -> None``, as :func:`labhelpers.interactive_figure` calls them (the tables a widget shows are keyword
arguments, bound with :func:`functools.partial`).
"""

from __future__ import annotations

import dataclasses

import pandas as pd
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from ..experiments.matmul import roofline_points
from ..kernels.matmul import ORDERS
from ..models.tiling import naive_loads, tile_phase, tiled_loads
from ..plotting import figure_axes, readable_pt
from ..roofline.ceilings import Ceilings
from ..roofline import draw as roofline_draw

#: The example of the tiling widget: A is 10 x 11, B is 11 x 13, tiles of 4.
WIDGET_SHAPE = dict(m=10, k=11, n=13, tile=4)


def draw_tiling(ax, m: int, k: int, n: int, tile: int, block_row: int, block_col: int, phase: int) -> None:
    """Draw ``A`` (left), ``B`` (top) and ``C`` (bottom right) cell by cell, with what a block uses.

    Dark: the tiles of ``A`` and ``B`` in shared memory during ``phase``; light: tiles the block
    loaded in earlier phases; outlined in ``C``: the block's outputs. The title counts the
    global loads of the whole grid with and without tiles (what a phase holds:
    :func:`labhelpers.models.tiling.tile_phase`).
    """
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
                transform=ax.transAxes, va="top", fontsize=max(8, readable_pt(ax.figure)), color="0.3")
    ax.set_xscale("log", base=2)
    ax.set_yscale(yscale)
    ax.set_xlabel("n (n x n matrices)")
    ax.set_ylabel("GFLOP/s")
    ax.grid(True, which="both", alpha=0.25)
    if drawn:
        ax.legend(fontsize=max(7, readable_pt(ax.figure)), ncol=2, loc="lower right")


def draw_phase(ax, block_row: int, block_col: int, phase: int) -> None:
    """The tiling widget: :func:`draw_tiling` of the chapter's example (:data:`WIDGET_SHAPE`)."""
    draw_tiling(ax, **WIDGET_SHAPE, block_row=block_row, block_col=block_col, phase=phase)


def plot_cpu_loop_orders(live: pd.DataFrame, reference, *, ax=None) -> Figure:
    """GFLOP/s of the three loop orders and NumPy against ``n``: this run's CPU solid, the reference dashed.

    ``live`` has ``order``, ``n``, ``gflops``; ``reference`` is the ``ch05_cpu_loop_order`` reference data.
    """
    fig, ax = figure_axes(ax, (7, 3.5))
    for i, order in enumerate([*ORDERS, "numpy"]):
        mine = live[live["order"] == order]
        ref = reference.table[reference.table["order"] == order].dropna(subset=["gflops"])
        if len(mine):
            ax.plot(mine["n"], mine["gflops"], "-s", color=f"C{i}", markersize=4, label=f"{order} (this run's CPU)")
        if len(ref):
            ax.plot(ref["n"], ref["gflops"], "--o", color=f"C{i}", markersize=3, alpha=0.8,
                    label=f"{order} (reference)")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("n (n x n float32 matrices)")
    ax.set_ylabel("GFLOP/s")
    ax.set_title("Three loops, three orders (numba njit, one CPU core)", fontsize=10)
    ax.text(0.01, 0.01, f"reference: {reference.meta.get('cpu', '?')}, the CPU of the {reference.gpu} machine",
            transform=ax.transAxes, fontsize=7, color="0.3")
    ax.grid(True, which="both", alpha=0.25)
    ax.legend(fontsize=7)
    return fig


def draw_sweep_widget(ax, tile: int, scale: str, *, table: pd.DataFrame, label: str,
                      live: pd.DataFrame | None = None) -> None:
    """The sweep widget: :func:`draw_sweep` with the tiled kernel's ``tile`` and a ``"log"``/``"linear"`` axis."""
    draw_sweep(ax, table, tile=tile, label=label, live=live, yscale=scale)
    ax.set_title(f"n x n float32 products (cuBLAS FP64: float64); tiled kernel with {tile} x {tile} tiles",
                 fontsize=max(9, readable_pt(ax.figure)))


def draw_roofline(ax, n: int, *, table: pd.DataFrame, ceilings: Ceilings, cublas_gflops: float,
                  label: str) -> None:
    """The kernels of a sweep ``table`` at size ``n`` on the roofline of the copy ceiling and cuBLAS FP32.

    Drawn by the one roofline plotter, :func:`labhelpers.roofline.draw_roofline`: the slanted roof is
    ``ceilings.dram_gbs``, the flat one ``cublas_gflops`` (the best FP32 product measured, not the FMA peak);
    the tiled kernel is shown with 16 x 16 tiles only. ``label`` names where the roofs come from.
    """
    points = roofline_points(table, n)
    shown = [{"name": k, "intensity": x, "gflops": y} for k, (x, y) in points.items()
             if not k.startswith("tiled") or k == "tiled 16"]
    roofs = dataclasses.replace(ceilings, fp32_gflops=cublas_gflops, l2_gbs=None, fp64_gflops=None, label=label)
    roofline_draw.draw_roofline(ax, roofs, pd.DataFrame(shown, columns=["name", "intensity", "gflops"]),
                                memory=("dram_gbs",), compute=("fp32_gflops",),
                                roof_names={"fp32_gflops": "cuBLAS FP32"}, points_label=label, xlim=(0.1, 2000),
                                legend="lower right")
    ax.set_title(f"n = {n}: measured GFLOP/s at each kernel's global-memory intensity", fontsize=9)


__all__ = ["WIDGET_SHAPE", "draw_phase", "draw_roofline", "draw_sweep", "draw_sweep_widget", "draw_tiling",
           "plot_cpu_loop_orders"]
