"""Chapter "CUDA in Python": the figure of SAXPY timed three ways, and the launch calculator's drawing.

Static figures return their Figure; the widget draw function takes the axes first, ``draw_x(ax, **params) ->
None``, as :func:`labhelpers.interactive_figure` calls it.
"""

from __future__ import annotations

import math

import pandas as pd
from matplotlib.figure import Figure
from matplotlib.patches import Patch, Rectangle

from ..errors import LaunchConfigError
from ..launch import WARP_SIZE
from ..measured import Measured
from ..plotting import figure_panels, readable_pt
from ..models.launch_summary import summarize_launch
from ..plotting import plot_comparison
from ..refdata import Reference


def plot_saxpy_three_ways(data: Measured | Reference, live: pd.DataFrame | None = None, *, axes=None) -> Figure:
    """Time and GB/s of the three SAXPY ways against n, log-log: reference dashed, this GPU's sweep solid.

    Args:
        data: the :class:`~labhelpers.measured.Measured` of ``lh.live_or_reference(..., "ch01_saxpy_three_ways")``
            (its reference is drawn dashed, and its table solid when it was measured on this GPU), or the
            reference data itself.
        live: with a reference as ``data``: a :func:`~labhelpers.experiments.cuda_intro.saxpy_three_ways` table
            measured here, or None (the simulator has no timings).

    Every line's label names where its numbers come from (``reference: <GPU> (<date>)`` or ``this GPU:
    <GPU>``); the title names no GPU, so it is true whichever lines are drawn.

    Returns:
        The matplotlib figure.
    """
    if isinstance(data, Measured):
        measured, reference = (data if data.is_live else None), data.reference
    else:
        measured, reference = live, data
    tables = [t for t in (reference.table if reference is not None else None,
                          measured.table if isinstance(measured, Measured) else measured) if t is not None]
    is_live = measured is not None and (not isinstance(measured, Measured) or measured.is_live)
    fig, axes = figure_panels(axes, (1, 2), (9.4, 4.8))  # no wider: 10 pt ticks stay readable in the column
    small = readable_pt(fig)
    for ax, column, ylabel in ((axes[0], "median_ms", "time per SAXPY (ms)"),
                               (axes[1], "gbps", "GB/s  (12 n bytes / time)")):
        has_data = any(pd.to_numeric(t[column], errors="coerce").gt(0).any() for t in tables)
        plot_comparison(x="n", y=column, group="method", live=measured, reference=reference, ax=ax,
                        logx=True, logy=has_data, xlabel="n (float32 elements)", ylabel=ylabel)
        if not has_data:
            ax.text(0.5, 0.5, "no timings in this reference data", transform=ax.transAxes, ha="center", color="0.4")
    handles, labels = axes[1].get_legend_handles_labels()
    for ax in axes:
        if ax.get_legend() is not None:
            ax.get_legend().remove()
    fig.suptitle("SAXPY three ways: dashed lines reference data, solid lines this GPU (when there is one)",
                 fontsize=max(9, small))
    fig.tight_layout(rect=(0, 0.19, 1, 1))  # room for the legend's three rows
    if handles:
        fig.legend(handles, labels, loc="lower center", ncol=1 if not is_live else 2, fontsize=max(8, small),
                   frameon=False)
    return fig


ACTIVE_COLOR = "#3b75af"


IDLE_COLOR = "#ef8636"


EMPTY_COLOR = "#d9d9d9"


def _block_rows(blocks: int, lanes_per_block: int) -> int:
    """Blocks per row of the picture: about 1024 lanes per row, at least one block."""
    return max(1, min(blocks, 1024 // lanes_per_block if lanes_per_block <= 1024 else 1))


def draw_launch(ax, n: int, threads: int) -> None:
    """Draw the blocks of a 1D launch for ``n`` elements: threads with work, idle threads, empty warp lanes.

    Each block is a bar as wide as its warps' lanes (32 per warp); thin lines separate the warps.
    Blue: threads with an element. Orange: idle threads (index >= n, stopped by the bounds check).
    Grey: lanes of a partly filled warp that hold no thread at all. An impossible launch is
    reported on the axes instead.
    """
    try:
        s = summarize_launch(n, threads)
    except LaunchConfigError as exc:
        ax.text(0.5, 0.5, f"LaunchConfigError:\n{exc}", ha="center", va="center", wrap=True, color="#b22222",
                transform=ax.transAxes)
        ax.set_axis_off()
        return
    lanes = s.warps_per_block * WARP_SIZE
    per_row = _block_rows(s.blocks, lanes)
    gap = lanes * 0.06
    for b in range(s.blocks):
        x0 = (b % per_row) * (lanes + gap)
        y0 = -(b // per_row) * 1.4
        active = max(0, min(threads, n - b * threads))
        for start, stop, color in ((0, active, ACTIVE_COLOR), (active, threads, IDLE_COLOR),
                                   (threads, lanes, EMPTY_COLOR)):
            if stop > start:
                ax.add_patch(Rectangle((x0 + start, y0), stop - start, 1, facecolor=color, edgecolor="none"))
        for w in range(1, s.warps_per_block):
            ax.plot([x0 + w * WARP_SIZE] * 2, [y0, y0 + 1], color="white", linewidth=0.8)
        ax.add_patch(Rectangle((x0, y0), lanes, 1, fill=False, edgecolor="0.2", linewidth=0.8))
        if s.blocks <= 32 and per_row <= 8:  # a label per block where eight fit across the figure
            ax.text(x0 + lanes / 2, y0 + 1.05, f"block {b}", ha="center", va="bottom",
                    fontsize=readable_pt(ax.figure))
    rows = math.ceil(s.blocks / per_row)
    ax.set_xlim(-gap, per_row * (lanes + gap))
    ax.set_ylim(-(rows - 1) * 1.4 - 0.2, 1.5)
    ax.set_axis_off()
    ax.set_title(f"n = {n}, {threads} threads/block: {s.blocks} blocks, {s.total_threads} threads "
                 f"({s.idle_threads} idle), {s.warps} warps, {s.lane_efficiency:.0%} of lanes busy", fontsize=9)
    ax.legend(handles=[Patch(color=ACTIVE_COLOR, label="thread with an element"),
                       Patch(color=IDLE_COLOR, label="idle thread (i >= n)"),
                       Patch(color=EMPTY_COLOR, label="empty lane of a partial warp")],
              loc="upper center", bbox_to_anchor=(0.5, 0.0), ncol=3, fontsize=max(8, readable_pt(ax.figure)), frameon=False)
