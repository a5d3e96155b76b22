"""Chapter 4's figures (scheduling): the warp scheduler's timeline, the vector add warp by warp, divergence,
and what limits occupancy.

Two kinds of function, one signature each:

* static figures, ``plot_x(table_or_model_args..., *, ax=None, label=...) -> Figure``: they draw on ``ax`` (or on
  new axes) and return the Figure, so that a notebook cell is one call and ``plt.show()``;
* widget draw functions, ``draw_x(ax, **params) -> None``: what :func:`labhelpers.interactive_figure` calls with
  the axes it made and one keyword per control.
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from ..errors import LaunchConfigError
from ..models import occupancy as occ
from ..models import scheduling as wt
from ..gpus import KIB, PRESETS, SMLimits
from ..models.occupancy import RESOURCES, Occupancy
from ..models.scheduling import ISSUE, READY, STALL, VECTOR_ADD, Timeline, Walkthrough
from ..plotting import figure_axes, figure_panels, readable_pt

_COLOURS = {ISSUE: "tab:green", STALL: "tab:red", READY: "0.85"}


_NAMES = {ISSUE: "issuing", STALL: "stalled on memory", READY: "ready, waiting for the scheduler"}


def _runs(row: np.ndarray, value: int) -> list[tuple[int, int]]:
    """(start, length) of every run of ``value`` in ``row``."""
    mask = np.concatenate([[False], row == value, [False]])
    edges = np.flatnonzero(mask[1:] != mask[:-1])
    return [(int(s), int(e - s)) for s, e in zip(edges[::2], edges[1::2])]


def draw_timeline(ax, timeline: Timeline) -> None:
    """Draw one row per warp (issuing / stalled / waiting) and a row of the scheduler's idle cycles."""
    n = timeline.n_warps
    labelled = set()
    for w in range(n):
        for value, colour in _COLOURS.items():
            runs = _runs(timeline.state[w], value)
            if runs:
                ax.broken_barh(runs, (n - w - 0.4, 0.8), facecolors=colour,
                               label=None if value in labelled else _NAMES[value])
                labelled.add(value)
    idle = _runs(timeline.issuing, -1)
    if idle:
        ax.broken_barh(idle, (-1.4, 0.8), facecolors="black", label="scheduler idle")
    ax.set_yticks([n - w for w in range(n)] + [-1])
    ax.set_yticklabels([f"warp {w}" for w in range(n)] + ["idle"])
    ax.set_xlim(0, timeline.cycles)
    ax.set_ylim(-2, n + 1.5)  # room above the warps for the legend
    ax.set_xlabel("cycle")
    ax.set_title(f"{n} warp(s), burst {timeline.burst}, stall {timeline.stall} ({timeline.policy}): "
                 f"utilisation {timeline.utilisation:.0%}", fontsize=10)
    handles, labels = ax.get_legend_handles_labels()
    by_label = dict(zip(labels, handles))
    ax.legend(by_label.values(), by_label.keys(), fontsize=max(7, readable_pt(ax.figure)), loc="upper center",
              ncol=4, frameon=False)




def plot_timelines(warps: Sequence[int] = (3, 4), *, burst: int = 20, stall: int = 50, cycles: int = 280,
                   axes=None) -> Figure:
    """One timeline per warp count, stacked, the same cycles on every row (the lecture's 3 warps against 4), on
    ``axes`` (one per warp count) or in a new figure."""
    fig, axes = figure_panels(axes, (len(warps), 1), (8, 2.3 * len(warps)), sharex=True, squeeze=False)
    for ax, n in zip(axes[:, 0], warps):
        draw_timeline(ax, wt.simulate(n, burst=burst, stall=stall, cycles=cycles))
    fig.tight_layout()
    return fig


def draw_scheduler(ax, n_warps: int, burst: int, stall: int, policy: str) -> None:
    """The scheduler widget: :func:`draw_timeline` over whole rounds of burst + stall, at least 240 cycles."""
    cycles = (burst + stall) * max(4, -(-240 // (burst + stall)))  # not launch geometry: whole rounds on the axis
    draw_timeline(ax, wt.simulate(n_warps, burst, stall, cycles=cycles, policy=policy))


_KIND_COLOURS = {"alu": "tab:green", "branch": "tab:purple", "load": "tab:blue", "store": "tab:orange",
                 "exit": "0.5"}


def draw_walkthrough(ax, walk: Walkthrough) -> None:
    """Draw a :class:`Walkthrough`: one row per warp, a box per issued instruction, red where the scoreboard waits."""
    kinds = {ins.text: ins.kind for part in VECTOR_ADD.values() for ins in part}
    n_warps = walk.trace.shape[1]
    small = max(6, readable_pt(ax.figure))
    labelled = set()
    for w, column in enumerate(walk.trace.columns):
        y = n_warps - 1 - w
        for cycle, text in enumerate(walk.trace[column]):
            if text.startswith("waits"):
                ax.broken_barh([(cycle, 1)], (y - 0.3, 0.6), facecolors="mistyrose",
                               label=None if "waiting" in labelled else "waiting on the scoreboard")
                labelled.add("waiting")
            elif text in kinds:
                kind = kinds[text]
                ax.broken_barh([(cycle, 1)], (y - 0.4, 0.8), facecolors=_KIND_COLOURS[kind],
                               label=None if kind in labelled else kind)
                labelled.add(kind)
                ax.text(cycle + 0.5, y, text.split()[0].split(".")[0], rotation=90, ha="center", va="center",
                        fontsize=small, color="white")
    ax.set_yticks(range(n_warps))
    ax.set_yticklabels([f"warp {n_warps - 1 - k}" for k in range(n_warps)])
    ax.set_xlim(0, walk.cycles)
    ax.set_ylim(-0.8, n_warps + 0.4)
    ax.set_xlabel("cycle")
    ax.set_title(f"vector add of {walk.n} elements, {walk.threads} threads in warps of {walk.warp_size}, memory latency "
                 f"{walk.memory_latency}: {walk.cycles} cycles, {walk.idle_cycles} idle", fontsize=max(9, small))
    handles, labels = ax.get_legend_handles_labels()
    ax.legend(handles, labels, fontsize=max(7, small), loc="upper center", ncol=6, frameon=False)


def draw_vector_add(ax, n: int, memory_latency: int, *, threads: int = 8, warp_size: int = 4) -> None:
    """The vector-add widget: :func:`draw_walkthrough` of ``n`` elements in warps of ``warp_size`` lanes."""
    draw_walkthrough(ax, wt.vector_add_walkthrough(n=n, threads=threads, warp_size=warp_size,
                                                  memory_latency=memory_latency))


def plot_divergence(table: pd.DataFrame, *, label: str, ax=None) -> Figure:
    """Median time of each divergence kernel (``table`` indexed by ``kernel``, column ``median_ms``), log scale.

    Without timings (the simulator's table) the bars are empty and the axis stays linear.
    """
    fig, ax = figure_axes(ax, (7, 3.2))
    times = table["median_ms"][::-1]
    bars = ax.barh(times.index, times.fillna(0), color="tab:blue")
    if times.notna().all():
        ax.set_xscale("log")
        ax.bar_label(bars, labels=[f"{t:.3g} ms" for t in times], padding=3, fontsize=8)
        ax.set_xlim(right=times.max() * 4)  # room for the label of the longest bar
    ax.set_xlabel("median time (ms, log scale)")
    ax.set_title(f"Divergence, {label}", fontsize=9)
    fig.tight_layout()
    return fig


def plot_occupancy_by_registers(limits: SMLimits, kernel_registers: dict[str, int], *, threads: int = 256,
                                registers: Sequence[int] = range(8, 256), ax=None) -> Figure:
    """Occupancy against registers per thread (the calculator), with the given kernels marked at their counts."""
    fig, ax = figure_axes(ax, (7, 3))
    registers = np.asarray(registers)
    ax.step(registers, [occ.occupancy(threads, int(r), 0, limits).occupancy for r in registers], where="post")
    ax.set_xlabel(f"registers per thread ({threads}-thread blocks)")
    ax.set_ylabel("occupancy")
    ax.set_title(f"Occupancy against registers on {limits.name} (the calculator)", fontsize=9)
    for name, r in kernel_registers.items():
        at = occ.occupancy(threads, int(r), 0, limits).occupancy
        ax.plot(r, at, "o", color="tab:red")
        ax.annotate(f"{name}: {r} registers", (r, at), xytext=(8, 4), textcoords="offset points", fontsize=8)
    ax.grid(alpha=0.3)
    return fig


def draw_limits(ax, result: Occupancy) -> None:
    """Bars: the blocks per SM each resource allows; the smallest (the limit) in red."""
    names = list(RESOURCES)
    cap = max(v for v in result.limits.values() if v is not None)
    values = [result.limits[n] if result.limits[n] is not None else cap for n in names]
    colours = ["tab:red" if n in result.limiting else "tab:blue" for n in names]
    bars = ax.barh(names[::-1], values[::-1], color=colours[::-1])
    for bar, name in zip(bars, names[::-1]):
        v = result.limits[name]
        ax.text(bar.get_width(), bar.get_y() + bar.get_height() / 2, f" {v}" if v is not None else " no limit",
                va="center", fontsize=8)
    ax.axvline(result.blocks_per_sm, color="tab:red", linestyle=":", linewidth=1)
    ax.set_xlim(0, max(values) * 1.25 + 1)
    ax.set_xlabel("blocks per SM this resource allows")
    ax.set_title(f"{result.threads_per_block} thr x {result.registers_per_thread} regs, "
                 f"{result.shared_per_block / KIB:.1f} KB shared: {result.blocks_per_sm} blocks, "
                 f"{result.warps_per_sm}/{result.sm.max_warps_per_sm} warps = {result.occupancy:.0%} "
                 f"({' and '.join(result.limiting)})", fontsize=9)


def draw_occupancy(ax, sm_name: str, threads: int, registers: int, shared_kb: int, *,
                   this_gpu: SMLimits | None = None) -> None:
    """The occupancy widget: :func:`draw_limits` for a preset (``gpus.PRESETS``) or ``"this GPU"``
    (``this_gpu``); a configuration that cannot launch is explained on the axes instead."""
    limits = this_gpu if sm_name == "this GPU" else PRESETS[sm_name]
    if limits is None:
        raise ValueError("sm_name 'this GPU' needs this_gpu=gpus.current().sm")
    try:
        draw_limits(ax, occ.occupancy(threads, registers, shared_kb * 1024, limits))
    except LaunchConfigError as err:
        ax.text(0, 0.5, textwrap.fill(str(err), 90), fontsize=9, va="center")
        ax.axis("off")


__all__ = ["draw_limits", "draw_occupancy", "draw_scheduler", "draw_timeline", "draw_vector_add", "draw_walkthrough",
           "plot_divergence", "plot_occupancy_by_registers", "plot_timelines"]
