"""Plots that never pass a simulator run or a reference off as this machine's GPU.

:func:`plot_comparison` draws a reference GPU's curve (dashed, labelled with that GPU's
name and date) and, when there is one, this machine's measured curve (solid, labelled
"this machine: <GPU name>"). Without a GPU it says so on the figure itself.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd

from .device import device_info
from .refdata import Reference
from .sweep import STATUS_OK


def live_rows(table: pd.DataFrame | None) -> pd.DataFrame | None:
    """The rows of a sweep table that hold real GPU timings, or None if there are none."""
    if table is None or "status" not in table:
        return None
    ok = table[table["status"] == STATUS_OK]
    return ok if len(ok) else None


def _draw(ax, table: pd.DataFrame, x: str, y: str, group: str | None, style: dict, label: str) -> None:
    if group is None:
        data = table.sort_values(x)
        ax.plot(data[x], data[y], label=label, **style)
        return
    for i, (key, data) in enumerate(table.groupby(group, sort=True)):
        data = data.sort_values(x)
        color = f"C{i % 10}"
        ax.plot(data[x], data[y], label=f"{group}={key} ({label})", color=color, **style)


def plot_comparison(
    *,
    x: str,
    y: str,
    live: pd.DataFrame | None = None,
    reference: Reference | None = None,
    group: str | None = None,
    ax=None,
    xlabel: str | None = None,
    ylabel: str | None = None,
    title: str | None = None,
    logx: bool = False,
    logy: bool = False,
):
    """Plot column ``y`` against ``x`` for this machine and for a reference GPU.

    Args:
        x, y: column names present in both tables.
        live: a sweep table from this machine (rows without GPU timings are ignored).
        reference: reference data (see :func:`labhelpers.refdata.load_reference`).
        group: optional column drawing one line per value.
        ax: matplotlib axes to draw on (a new figure otherwise).

    Returns:
        The axes.
    """
    if ax is None:
        _, ax = plt.subplots(figsize=(7, 4))
    live = live_rows(live)
    if reference is not None:
        _draw(ax, reference.table, x, y, group, {"linestyle": "--", "marker": "o", "markersize": 3, "alpha": 0.8},
              reference.label)
    if live is not None:
        _draw(ax, live, x, y, group, {"linestyle": "-", "marker": "s", "markersize": 4},
              f"this machine: {device_info().name}")
    elif reference is not None:
        ax.text(0.01, 0.99, f"No GPU timings here: dashed lines are reference data from {reference.gpu}",
                transform=ax.transAxes, va="top", fontsize=8, color="0.3")
    ax.set_xlabel(xlabel or x)
    ax.set_ylabel(ylabel or y)
    if logx:
        ax.set_xscale("log", base=2)
    if logy and any(len(line.get_ydata()) and (line.get_ydata() > 0).any() for line in ax.get_lines()):
        ax.set_yscale("log")  # only with something positive to show: log of nothing raises
    if title:
        ax.set_title(title)
    ax.grid(True, alpha=0.3)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=8)
    return ax
