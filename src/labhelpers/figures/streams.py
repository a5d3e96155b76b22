"""Chapter "Streams and the host-device link": figures and widget draw functions.

Static figures: ``plot_x(table..., *, ax=None, label=...) -> Figure`` (``axes=None`` for the ones of several
panels; a new figure of the size the chapter shows when None), drawing a table (a
:class:`~labhelpers.measured.Measured` table or a reference table) with the label of its source (``this GPU: ...``
or ``reference: ...``) in the title or legend. Drawers ``draw_x(ax, ...) -> None`` draw on the axes given: the
widget's :func:`draw_pipeline`, and :func:`draw_gantt`, the one Gantt chart of a model timeline
(:func:`labhelpers.models.streams.simulate_pipeline`) and of a measured one
(:func:`labhelpers.experiments.streams.gantt_table`).
"""

from __future__ import annotations

import textwrap

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib import patches
from matplotlib.figure import Figure

from ..models import streams as model
from ..plotting import figure_axes, readable_pt

OP_COLORS = {"H2D": "#4c78a8", "kernel": "#f58518", "D2H": "#54a24b"}
LINE_COLORS = {"H2D pinned": "#4c78a8", "D2H pinned": "#54a24b", "H2D pageable": "#9ecae9",
               "D2H pageable": "#a1d99b"}
#: Stage times (ms) of the pipeline widget's copies: the reference GPU's 256 MiB pinned copies, rounded (tests check them against ch11_pipeline).
WIDGET_H2D_MS = 4.9
WIDGET_D2H_MS = 4.9


# ============================================================================================ the link


def plot_transfers(table: pd.DataFrame, fits: pd.DataFrame | None = None, *, ax=None, label: str = "",
                   link_max_gbs: float | None = None) -> Figure:
    """Bandwidth (GB/s) against transfer size for each line of a transfer table, the fitted model dashed."""
    fig, ax = figure_axes(ax, (7.5, 4.4))
    for name, part in table.groupby("transfer", sort=False):
        part = part.sort_values("nbytes")
        color = LINE_COLORS.get(name)
        ax.plot(part["nbytes"], part["gbps"], "o-", ms=3.5, color=color, label=name)
        if fits is not None and name in set(fits["transfer"]):
            f = fits.set_index("transfer").loc[name]
            sizes = np.logspace(np.log10(part["nbytes"].min()), np.log10(part["nbytes"].max()), 100)
            fitted = model.LinkFit(float(f["latency_us"]), float(f["bandwidth_gbs"]))
            ax.plot(sizes, sizes / (fitted.time_ms(sizes) * 1e6), "--", lw=1, color=color)
    if link_max_gbs and np.isfinite(link_max_gbs):
        ax.axhline(link_max_gbs, color="0.3", lw=1, ls=":")
        ax.text(table["nbytes"].max(), link_max_gbs * 1.15, f"link maximum {link_max_gbs:.1f} GB/s", fontsize=8,
                color="0.3", ha="right")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("bytes per transfer")
    ax.set_ylabel("GB/s (10^9 bytes/s)")
    ax.set_title(f"Host-device transfers (dashed: latency + bytes / bandwidth)\n{label}", fontsize=9)
    ax.legend(fontsize=8, loc="lower right")
    ax.grid(True, which="major", alpha=0.3)
    return fig


# ============================================================================================ timelines


def draw_gantt(ax, timeline: pd.DataFrame, title: str = "", *, xmax: float | None = None,
               legend: bool = True) -> None:
    """A Gantt chart: one lane per stream, one bar per operation (H2D, kernel, D2H), chunk numbers on the bars.

    ``timeline`` has the columns ``chunk``, ``stream``, ``op``, ``start_ms``, ``end_ms`` (a model timeline or a
    measured one: for a measured one the bar starts when the stream reached the operation, so a copy that
    waited for its engine shows a longer bar than the copy itself).
    """
    streams = sorted(timeline["stream"].unique())
    small = readable_pt(ax.figure)
    for r in timeline.itertuples():
        lane = streams.index(r.stream)
        width = max(r.end_ms - r.start_ms, 1e-6)
        ax.add_patch(patches.Rectangle((r.start_ms, lane - 0.38), width, 0.76, facecolor=OP_COLORS[r.op],
                                       edgecolor="white", lw=0.6))
        if width > 0.04 * (xmax or timeline["end_ms"].max()):
            ax.text(r.start_ms + width / 2, lane, str(r.chunk), ha="center", va="center", fontsize=small,
                    color="white")
    end = float(timeline["end_ms"].max())
    ax.axvline(end, color="0.2", lw=0.8, ls=":")
    ax.set_xlim(0, xmax or end * 1.03)
    ax.set_ylim(len(streams) - 0.5, -0.5)
    ax.set_yticks(range(len(streams)), [f"stream {s}" for s in streams], fontsize=max(8, small))
    ax.set_xlabel("ms")
    ax.set_title(f"{title}  (end {end:.2f} ms)" if title else f"end {end:.2f} ms", fontsize=max(9, small))
    if legend:  # outside the axes, right of the lanes: it never hides a bar
        handles = [patches.Patch(color=c, label=op) for op, c in OP_COLORS.items()]
        ax.legend(handles=handles, fontsize=small, loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False)


def draw_pipeline(ax, chunks: int = 8, streams: int = 4, copy_engines: int = 2, kernel_ms: float = 4.6,
                  order: str = "depth-first") -> None:
    """Widget: the engine model's Gantt chart of a 256 MiB job (copies about as long as the reference GPU's), and its numbers."""
    streams = min(streams, chunks)
    t = model.simulate_pipeline(WIDGET_H2D_MS, kernel_ms, WIDGET_D2H_MS, chunks, streams,
                                copy_engines=copy_engines, order=order)
    serial = WIDGET_H2D_MS + kernel_ms + WIDGET_D2H_MS
    total = float(t["end_ms"].max())
    draw_gantt(ax, t, xmax=serial * 1.02)
    bound = model.lower_bound(WIDGET_H2D_MS, kernel_ms, WIDGET_D2H_MS, copy_engines)
    ax.set_title(f"{chunks} chunks on {streams} stream(s), {copy_engines} copy engine(s), {order}: {total:.2f} ms\n"
                 f"= {serial / total:.2f}x faster than serial ({serial:.1f} ms); busiest engine {bound:.2f} ms "
                 f"({model.bottleneck(WIDGET_H2D_MS, kernel_ms, WIDGET_D2H_MS, copy_engines)})",
                 fontsize=readable_pt(ax.figure))


def plot_gantt_pair(measured: pd.DataFrame, modelled: pd.DataFrame, *, axes=None, label: str) -> Figure:
    """Measured (left) and modelled (right) timelines on the same time axis.

    ``axes``: a pair of axes (a row of the chapter's grid; a new 11 x 2.5 figure of two when None, its layout
    then tightened).
    """
    new = axes is None
    if new:
        _, axes = plt.subplots(1, 2, figsize=(9.4, 2.5))
    xmax = 1.03 * max(measured["end_ms"].max(), modelled["end_ms"].max())
    draw_gantt(axes[0], measured, f"measured ({label})", xmax=xmax, legend=False)
    draw_gantt(axes[1], modelled, "model", xmax=xmax)
    if new:
        axes[0].figure.tight_layout()
    return axes[0].figure


# ============================================================================================ the pipeline sweep


def plot_pipeline_sweep(table: pd.DataFrame, *, axes=None, label: str) -> Figure:
    """Wall time against chunks, one line per stream count, depth-first (first) and breadth-first (second).

    ``axes``: a pair of axes (when None a new 7 x 8 figure of two sharing y, one above the other so that its text
    stays legible in the page's column, its layout then tightened).
    """
    new = axes is None
    if new:
        _, axes = plt.subplots(2, 1, figsize=(7, 8), sharey=True)
    pinned = table[table["host_memory"] == "pinned"]
    first = pinned.iloc[0]
    stage_max = float(max(first["h2d_ms"], first["kernel_ms"], first["d2h_ms"]))
    serial = float(first["h2d_ms"] + first["kernel_ms"] + first["d2h_ms"])
    driver = pinned[pinned["issue"] == "driver"] if "issue" in pinned else pinned.iloc[:0]
    numba = pinned[pinned["issue"] == "numba"] if "issue" in pinned else pinned
    small = max(7, readable_pt(axes[0].figure))  # 7 pt, or more in a wide figure the page shrinks
    for ax, order in zip(axes, model.ORDERS):
        part = numba[numba["order"] == order]
        for s, lines in part.groupby("streams"):
            lines = lines.sort_values("chunks")
            ax.plot(lines["chunks"], lines["wall_ms"], "o-", ms=3.5, label=f"{s} stream{'s' if s > 1 else ''}")
        fast = driver[driver["order"] == order]
        if len(fast):  # the driver's calls, at the stream count of their best run
            s = int(fast.loc[fast["wall_ms"].idxmin(), "streams"])
            lines = fast[fast["streams"] == s].sort_values("chunks")
            ax.plot(lines["chunks"], lines["wall_ms"], "k--", lw=1.2, label=f"{s} streams, driver's copies")
        ax.axhline(serial, color="0.4", ls="--", lw=1)
        ax.axhline(stage_max, color="0.2", ls=":", lw=1)
        ax.axhline(1.15 * stage_max, color="#d1495b", ls=":", lw=1)
        ax.text(1, serial * 1.02, "sum of the stages alone", fontsize=small, color="0.4")
        ax.text(1, stage_max * 0.93, "slowest stage alone", fontsize=small)
        ax.text(1, 1.15 * stage_max * 0.955, "1.15 x slowest stage", fontsize=small, color="#d1495b")
        if "both_ms" in first and np.isfinite(float(first["both_ms"])):  # the floor of a copy-bound pipeline
            ax.axhline(float(first["both_ms"]), color="#4c78a8", ls="-.", lw=1, label="H2D + D2H at once, alone")
        ax.set_xscale("log", base=2)
        ax.set_xlabel("chunks")
        ax.set_ylabel("wall time (ms)")
        ax.set_title(f"{order}\n{label}", fontsize=max(9, small))
        ax.set_ylim(0, max(part["wall_ms"].max(), serial) * 1.4)  # room for the legend above the lines
        ax.legend(fontsize=small, loc="upper center", ncol=3)
    if new:
        axes[0].figure.tight_layout()
    return axes[0].figure


def plot_model_vs_measured(comparison: pd.DataFrame, *, ax=None, label: str) -> Figure:
    """Measured wall time against the plain and the fitted model (one point per configuration).

    A new figure (``ax`` None) has its layout tightened.
    """
    new = ax is None
    fig, ax = figure_axes(ax, (5.2, 4.6))
    top = float(max(comparison[["wall_ms", "plain_ms", "fitted_ms"]].max())) * 1.05
    ax.plot([0, top], [0, top], color="0.5", lw=0.8)
    ax.scatter(comparison["plain_ms"], comparison["wall_ms"], s=14, color="0.65", label="plain model")
    ax.scatter(comparison["fitted_ms"], comparison["wall_ms"], s=14, color="#4c78a8",
               label="model with issue cost, copy sharing")
    ax.set_xlim(0, top)
    ax.set_ylim(0, top)
    ax.set_xlabel("model (ms)")
    ax.set_ylabel("measured (ms)")
    ax.set_title(f"Every configuration: measured against modelled\n{label}", fontsize=9)
    ax.legend(fontsize=7, loc="upper left")
    if new:
        fig.tight_layout()
    return fig


# ============================================================================================ unified memory


def plot_managed(table: pd.DataFrame, *, axes=None, label: str) -> Figure:
    """One panel per size: for each case, stacked bars of moving the data to the GPU, the kernel, and the
    result back to the host (linear time axis, so the lengths add up).

    ``axes``: one axes per size (a new 9.4 x 3.3 figure of them sharing y when None, its layout then tightened; no wider: the page shrinks a
    wider figure and its text).
    """
    ok = table[table["status"] == "ok"]
    cases = list(dict.fromkeys(ok["case"]))
    sizes = sorted(ok["mib"].unique())
    new = axes is None
    if new:
        _, axes = plt.subplots(1, len(sizes), figsize=(9.4, 3.3), sharey=True)
    axes = np.atleast_1d(axes)
    small = max(7, readable_pt(axes[0].figure))  # 7 pt, or more in a wide figure the page shrinks
    parts = (("to_gpu_ms", "to the GPU", "#4c78a8"), ("kernel_ms", "kernel", "#f58518"),
             ("to_host_ms", "back to the host", "#54a24b"))
    for ax, size in zip(axes, sizes):
        rows = ok[ok["mib"] == size].set_index("case").reindex(cases)
        left = np.zeros(len(cases))
        for column, name, color in parts:
            values = np.nan_to_num(rows[column].to_numpy(float))
            ax.barh(range(len(cases)), values, left=left, color=color, edgecolor="white", lw=0.4, label=name)
            left += values
        for y, total in enumerate(left):
            ax.text(total, y, f" {total:.1f} ms", va="center", fontsize=small)
        if ax is axes[0]:
            ax.set_yticks(range(len(cases)), [textwrap.fill(c, 22) for c in cases], fontsize=max(8, small))
        else:  # the cases named once, on the left (blank labels here would blank a shared axis's)
            ax.tick_params(labelleft=False)
        ax.invert_yaxis()
        ax.set_xlim(0, left.max() * 1.6)  # room for the totals' labels
        ax.set_xlabel("ms")
        ax.set_title(f"{size:g} MiB", fontsize=max(9, small))
    axes[-1].legend(fontsize=small, loc="upper right", bbox_to_anchor=(1.0, -0.22), ncol=len(parts), frameon=False)
    axes[0].figure.suptitle(f"Unified memory against explicit copies ({label})", fontsize=max(9, small))
    if new:
        axes[0].figure.tight_layout()
    return axes[0].figure


# ============================================================================================ several GPUs


def plot_multi_gpu(h2d_ms: float, kernel_ms: float, d2h_ms: float, *, ax=None, chunks: int = 16,
                   streams: int = 4) -> Figure:
    """Modelled time of one job on one GPU and split across two (own links, or one shared link).

    A new figure (``ax`` None) has its layout tightened.
    """
    new = ax is None
    fig, ax = figure_axes(ax, (8, 2.4))
    cases = {
        "1 GPU": model.pipeline_time(h2d_ms, kernel_ms, d2h_ms, chunks, streams),
        "2 GPUs, a link each": model.multi_gpu_time(h2d_ms, kernel_ms, d2h_ms, 2, chunks=chunks, streams=streams),
        "2 GPUs, one shared link": model.multi_gpu_time(h2d_ms, kernel_ms, d2h_ms, 2, chunks=chunks,
                                                        streams=streams, shared_link=True),
    }
    bars = ax.barh(list(cases), list(cases.values()), color=["#4c78a8", "#54a24b", "#e45756"])
    for bar, value in zip(bars, cases.values()):
        ax.text(value, bar.get_y() + bar.get_height() / 2, f" {value:.2f} ms", va="center", fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("modelled time (ms)")
    ax.set_xlim(0, max(cases.values()) * 1.25)
    ax.set_title(f"Model only (nothing measured): the job split across two GPUs, {chunks} chunks on {streams} "
                 "streams each", fontsize=8.5)
    if new:
        fig.tight_layout()
    return fig


__all__ = ["OP_COLORS", "draw_gantt", "draw_pipeline", "plot_gantt_pair", "plot_managed", "plot_model_vs_measured",
           "plot_multi_gpu", "plot_pipeline_sweep", "plot_transfers"]


# ============================================================================================ graphs and queues


def plot_launch_chain(issue_us: float, kernel_us: float, graph_launch_us: float, *, ax=None,
                      table: pd.DataFrame | None = None, label: str = "",
                      launches=(1, 3, 10, 30, 100, 300, 1000)) -> Figure:
    """Time per kernel against the chain's length: issued one by one and replayed as a graph, the model's lines
    (with the costs given, named in the legend) and, when a :func:`~labhelpers.experiments.streams.graph_table`
    is given, its measured wall times per kernel as points. A new figure (``ax`` None) has its layout tightened."""
    new = ax is None
    fig, ax = figure_axes(ax, (7.5, 3.6))
    counts = np.asarray(launches, dtype=int)
    one = [model.launch_chain_us(int(k), issue_us, kernel_us) / k for k in counts]
    graph = [model.graph_chain_us(int(k), graph_launch_us, kernel_us) / k for k in counts]
    ax.plot(counts, one, "--", color="#e45756",
            label=f"model, one by one ({issue_us:.3g} us to issue, {kernel_us:.3g} us to run)")
    ax.plot(counts, graph, "--", color="#4c78a8", label=f"model, one graph ({graph_launch_us:.3g} us to launch it)")
    if table is not None:
        for mode, color in (("op by op", "#e45756"), ("graph", "#4c78a8")):
            part = table[table["mode"] == mode].sort_values("launches")
            ax.plot(part["launches"], part["wall_us_per_op"], "o-", color=color, label=f"{mode}: {label}")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("kernels in the chain")
    ax.set_ylabel("wall time per kernel (us)")
    ax.legend(fontsize=8)
    if new:
        fig.tight_layout()
    return fig


def plot_queues(table: pd.DataFrame, *, ax=None, label: str = "") -> Figure:
    """Kernels running at once against the number of streams, one line per connection count and issue order.

    Measured concurrency (a :func:`~labhelpers.experiments.streams.queue_table`) as points and lines, the
    model as dashed lines; a :func:`~labhelpers.experiments.streams.queue_model_table` has the model only.
    A new figure (``ax`` None) has its layout tightened.
    """
    new = ax is None
    fig, ax = figure_axes(ax, (7.5, 4))
    colors = {1: "#9d755d", 8: "#e45756", 32: "#4c78a8"}
    for (c, order), part in table.groupby(["connections", "order"], sort=False):
        part = part.sort_values("streams")
        color = colors.get(int(c), "#777777")
        style = ":" if order == "breadth-first" else "--"
        name = f"{int(c)} connection{'s' if c != 1 else ''}, {order}"
        ax.plot(part["streams"], part["model_concurrency"], style, color=color, label=f"model: {name}")
        measured = part["concurrency"].dropna()
        if len(measured):
            ax.plot(part.loc[measured.index, "streams"], measured, "o-", ms=4, color=color, label=f"{name}: {label}")
    top = int(table["streams"].max())
    ax.plot([1, top], [1, top], color="#bbbbbb", lw=0.8, zorder=0)
    ax.set_xlabel("streams (2 dependent kernels each, issued stream by stream)")
    ax.set_ylabel("kernels running at once")
    ax.legend(fontsize=8)
    if new:
        fig.tight_layout()
    return fig


__all__ += ["plot_launch_chain", "plot_queues"]
