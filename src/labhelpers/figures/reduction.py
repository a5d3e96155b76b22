"""Chapter "Parallel reduction": the figures of the reference sweep, the lecture's table and Little's law.

Each function takes the data as :func:`labhelpers.load_reference` (a ``Reference``) or
:func:`labhelpers.live_or_reference` (a ``Measured``) returns it, both with a typed ``table`` and a
``label`` that names the GPU, and returns the matplotlib Figure (end the notebook cell with
``plt.show()``). The numbers come from :mod:`labhelpers.experiments.reduction`. :func:`draw_level` is the tree
widget's draw function, ``draw_level(ax, variant, block, level) -> None`` as :func:`labhelpers.interactive_figure`
calls it.
"""

from __future__ import annotations

import math
from typing import Sequence

import matplotlib.patches as mpatches
import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from ..experiments.reduction import best_per_variant, gbps_grid
from ..kernels.reduction import CLASSIC, VARIANTS
from ..measured import Measured, typed_table
from ..plotting import figure_axes, figure_panels, readable_pt
from ..models.reduction import BANKS, TREE_VARIANTS, WARP, tree_levels
from ..plotting import plot_comparison

#: What a panel says when its table has no measured number.
NOT_MEASURED = "not measured yet"
#: Colours of the yardsticks (:func:`labhelpers.experiments.reduction.ceilings`: the copy ceiling, then
#: ``cupy.sum``), in their order; a third and fourth for a second GPU's yardsticks.
CEILING_COLORS = ("C3", "C1", "C5", "C8")


def _size(table: pd.DataFrame) -> str:
    """``"2^26 float32"`` from the ``n`` column of a sweep table (``"float32"`` without one)."""
    n = table["n"].dropna().unique() if "n" in table else []
    if len(n) == 1 and int(n[0]) > 0 and int(n[0]) & (int(n[0]) - 1) == 0:
        return f"2^{int(math.log2(int(n[0])))} float32"
    return "float32"


def draw_heatmap(ax, grid: pd.DataFrame, title: str) -> None:
    """Draw a variant x block size table of GB/s (:func:`~labhelpers.experiments.reduction.gbps_grid`) on ``ax``.

    Colour is log10 of the bandwidth; every cell is written out; a table without numbers says so.
    """
    values = grid.to_numpy(dtype=float)
    small = readable_pt(ax.figure)
    ax.set_title(title, fontsize=max(9, small))
    ax.set_xticks(range(grid.shape[1]), [str(c) for c in grid.columns])
    ax.set_yticks(range(grid.shape[0]), [VARIANTS[k].label for k in grid.index], fontsize=max(8, small))
    ax.set_xlabel("threads per block")
    if not np.isfinite(values).any():
        ax.imshow(np.zeros_like(values), cmap="Greys", vmin=0, vmax=1, aspect="auto")
        ax.text(0.5, 0.5, NOT_MEASURED, transform=ax.transAxes, ha="center", va="center")
        return
    with np.errstate(divide="ignore", invalid="ignore"):
        logs = np.log10(values)
    ax.imshow(logs, cmap="viridis", aspect="auto")
    top = np.nanmax(logs)
    for (r, c), v in np.ndenumerate(values):
        text = f"{v:,.0f}" if np.isfinite(v) else "–"
        light = np.isfinite(v) and np.log10(v) < top - 0.6
        ax.text(c, r, text, ha="center", va="center", fontsize=max(7, small),
                color="white" if light else "black")


def plot_gbps_heatmaps(sweep, lecture, keys: Sequence[str] | None = None, *, axes=None) -> Figure:
    """Every variant at every block size: the sweep (top) above the lecture's published table (bottom).

    Args:
        sweep: the reduction sweep (reference ``ch06_reduction_sweep``, or measured here).
        lecture: the lecture's table (reference ``ch06_classic_lecture_table``): the classic variants 1-6.
        keys: the sweep's variants, top to bottom (default: every variant).
    """
    # one above the other: side by side, the column would shrink the cells' numbers below legibility
    fig, (ax_here, ax_lecture) = figure_panels(axes, (2, 1), (7, 8), gridspec_kw={"height_ratios": [1.7, 1]})
    draw_heatmap(ax_here, gbps_grid(sweep.table, keys), f"GB/s, {sweep.label}, {_size(sweep.table)}")
    meta = getattr(lecture, "meta", {})
    draw_heatmap(ax_lecture, gbps_grid(lecture.table, list(CLASSIC[:6])),
                 f"GB/s, the lecture's published table ({meta.get('date', '?')}):\n"
                 f"{lecture.gpu}, {meta.get('elements', '')}".rstrip(", "))
    fig.tight_layout()
    return fig


def _draw_ceilings(ax, yardsticks: dict[str, float], vertical: bool) -> None:
    for (name, level), color in zip(yardsticks.items(), CEILING_COLORS):
        if np.isfinite(level):
            line = ax.axvline if vertical else ax.axhline
            line(level, color=color, ls="--" if vertical else ":", lw=1.2 if vertical else 1, label=name)


def _reference_of(data):
    """The reference GPU's data drawn beside a live measurement (None when ``data`` is not live)."""
    if isinstance(data, Measured) and data.is_live and data.reference is not None:
        return data.reference
    return None


def plot_best_per_variant(sweep, yardsticks: dict[str, float] | None = None, keys: Sequence[str] | None = None, *,
                          ax=None) -> Figure:
    """Horizontal bars: each variant at its best block size, with the yardsticks as vertical lines.

    Classic variants (numbered 1-7) are blue, the later ones green; bars are labelled with their GB/s.
    ``sweep`` is a ``Reference`` or a ``Measured``: measured live on this GPU, the reference GPU's bars are
    drawn beside it (hatched) for comparison. ``yardsticks`` (name -> GB/s,
    :func:`~labhelpers.experiments.reduction.ceilings`) are drawn as dashed lines, named in the legend.
    """
    keys = list(VARIANTS) if keys is None else list(keys)
    values = best_per_variant(sweep.table, keys)["gbps"].to_numpy(dtype=float)
    reference = _reference_of(sweep)
    fig, ax = figure_axes(ax, (7, 4.8 if reference is not None else 4.4))
    small = readable_pt(fig)
    colors = ["C0" if VARIANTS[k].number else "C2" for k in keys]
    y = np.arange(len(keys), dtype=float)
    height = 0.8
    if reference is not None:
        height = 0.4
        ref_values = best_per_variant(typed_table(reference.table), keys)["gbps"].to_numpy(dtype=float)
        ax.barh(y + 0.2, np.nan_to_num(ref_values), height=height, color=colors, alpha=0.35, hatch="//",
                label=reference.label)
        y = y - 0.2
    ax.barh(y, np.nan_to_num(values), height=height, color=colors,
            label=sweep.label if reference is not None else None)
    ax.set_yticks(range(len(keys)), [VARIANTS[k].label for k in keys], fontsize=max(8, small))
    ax.invert_yaxis()
    _draw_ceilings(ax, yardsticks or {}, vertical=True)
    if not np.isfinite(values).any():
        ax.text(0.5, 0.5, NOT_MEASURED, transform=ax.transAxes, ha="center", va="center")
    ax.set_xlabel("effective bandwidth, GB/s (bytes read / time)")
    for yy, v in zip(y, values):
        if np.isfinite(v):
            ax.text(v + 40, yy, f"{v:,.0f}" if v >= 10 else f"{v:.1f}", va="center",
                    fontsize=max(7, small))
    ax.set_title(f"Best block size of every variant: {sweep.label}, {_size(sweep.table)}", fontsize=max(9, small))
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=max(7, small), loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=1)
    fig.tight_layout()
    return fig


def plot_loads_in_flight(flight, yardsticks: dict[str, float] | None = None, *, ax=None) -> Figure:
    """The best kernel's GB/s against the bytes it keeps in flight over the GPU, one line per block size.

    Args:
        flight: the loads-in-flight table (reference ``ch06_loads_in_flight``, or measured here).
        yardsticks: name -> GB/s drawn as horizontal lines
            (:func:`~labhelpers.experiments.reduction.ceilings`: the copy ceiling of the same GPU and
            ``cupy.sum``; name each with its source when the plot shows two GPUs).
    """
    table = flight.table
    fig, ax = figure_axes(ax, (7, 3.8))
    measured = bool(table["gbps"].notna().any())
    data = {"live": flight} if isinstance(flight, Measured) else {"reference": flight}
    plot_comparison(x="bytes_in_flight", y="gbps", group="threads", ax=ax, logx=measured,
                    xlabel="bytes in flight over the GPU (resident threads x unroll x 4 B)",
                    ylabel="GB/s (bytes read / time)", title="Bandwidth needs bytes in flight", **data)
    yardsticks = yardsticks or {}
    _draw_ceilings(ax, yardsticks, vertical=False)
    for _, row in table[table["threads"] == table["threads"].min()].iterrows():
        if np.isfinite(row["gbps"]) and np.isfinite(row["bytes_in_flight"]):
            ax.annotate(f"unroll {row['unroll']:.0f}", (row["bytes_in_flight"], row["gbps"]), fontsize=7,
                        textcoords="offset points", xytext=(4, -10))
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=8, loc="lower right")
    if measured:
        ax.set_ylim(0, 1.15 * np.nanmax([table["gbps"].max(), *yardsticks.values()]))
    fig.tight_layout()
    return fig


def draw_level(ax, variant: int = 1, block: int = 64, level: int = 1) -> None:
    """Draw one level of a block's tree: who adds, which words, which banks (for the chapter's widget).

    Top row: the threads (coloured by warp when they add, white when idle). Middle row:
    the shared-memory words, with a line from each adding thread to the word it writes
    (solid) and the word it adds (dashed). Bottom: for the warp with the worst conflict, how
    many different words its read touches in each of the 32 banks.
    """
    levels = tree_levels(variant, block)
    level = max(1, min(level, len(levels)))
    lv = levels[level - 1]
    adding = set(lv.threads)
    y_thr, y_mem, y_bank = 3.0, 1.4, -0.9
    written = dict(zip(lv.dst, lv.threads))
    for t in range(block):
        color = f"C{(t // WARP) % 10}" if t in adding else "white"
        ax.add_patch(mpatches.Rectangle((t, y_thr), 0.9, 0.6, facecolor=color, edgecolor="0.5", lw=0.5))
        fill = f"C{(written[t] // WARP) % 10}" if t in written else "0.93"
        ax.add_patch(mpatches.Rectangle((t, y_mem), 0.9, 0.6, facecolor=fill, alpha=0.45 if t in written else 1.0,
                                        edgecolor="0.5", lw=0.5))
    for t, d, s in zip(lv.threads, lv.dst, lv.src):
        color = f"C{(t // WARP) % 10}"
        ax.plot([t + 0.45, d + 0.45], [y_thr, y_mem + 0.6], color=color, lw=0.9)
        ax.plot([t + 0.45, s + 0.45], [y_thr, y_mem + 0.6], color=color, lw=0.7, ls="--", alpha=0.7)
    small = readable_pt(ax.figure)
    for w in range(0, block, 8 if block <= 64 else 16):  # labels at most 8 across, so that they never touch
        ax.text(w + 0.45, y_mem - 0.35, f"{w}\nbank {w % BANKS}", ha="center", va="top", fontsize=small)
    warp = lv.worst_warp
    counts = lv.bank_counts(warp, "src")
    scale = block / BANKS
    for b in range(BANKS):
        if counts[b]:
            ax.add_patch(mpatches.Rectangle((b * scale, y_bank), 0.8 * scale, 0.3 * counts[b],
                                            facecolor="C3" if counts[b] > 1 else "C2", edgecolor="none"))
            if counts[b] > 1:
                ax.text((b + 0.4) * scale, y_bank + 0.3 * counts[b] + 0.05, str(counts[b]), ha="center",
                        va="bottom", fontsize=small, color="C3")
    ax.plot([0, block], [y_bank, y_bank], color="0.4", lw=0.6)
    ax.text(0, y_bank - 0.08, "bank 0", ha="left", va="top", fontsize=small)
    ax.text(block, y_bank - 0.08, "bank 31", ha="right", va="top", fontsize=small)
    ax.text(-0.5, y_thr + 0.3, "threads", ha="right", va="center", fontsize=max(8, small))
    ax.text(-0.5, y_mem + 0.3, "shared\nmemory", ha="right", va="center", fontsize=max(8, small))
    ax.text(-0.5, y_bank + 0.4, f"banks read\nby warp {warp}", ha="right", va="center", fontsize=max(8, small))
    info = (f"{lv.active} of {block} threads add · warps with work: {lv.warps_with_work} of {lv.warps} · "
            f"divergent warps: {lv.divergent_warps} · worst bank conflict: {lv.worst_conflict}-way")
    ax.text(block / 2, y_bank - 0.45, info, ha="center", va="top", fontsize=max(8, small))
    ax.set_title(f"Variant {variant} ({TREE_VARIANTS[variant]}), block of {block}: level {level} of {len(levels)}, "
                 f"stride {lv.stride}", fontsize=9)
    ax.set_xlim(-0.5, block + 0.5)
    ax.set_ylim(y_bank - 0.9, y_thr + 0.8)
    ax.axis("off")
