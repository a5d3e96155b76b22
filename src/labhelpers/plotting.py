"""Plots that never pass a simulator run or a reference off as this machine's GPU.

:func:`plot_comparison` draws a reference GPU's curve (dashed, labelled with that GPU's
name and date) and, when there is one, this machine's measured curve (solid, labelled
"this GPU: <GPU name>"). Without a GPU it says so on the figure itself. The labels come
from :func:`labhelpers.measured.live_or_reference`, the one place that names data sources.
"""

from __future__ import annotations

import math

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.axis import Axis
from matplotlib.figure import Figure
from matplotlib.text import Text

from .measured import Measured, live_or_reference, timed_rows, typed_table
from .refdata import Reference


#: The width (px) at which the book's website shows a figure: its cell-output column (688 px at a 1280 px window),
#: and the pixel width of a widget's frames (labhelpers.site_frames).
COLUMN_PX = 680
#: The smallest text on the page, in CSS pixels (tools/browser_check.py fails below it).
MIN_TEXT_PX = 9.0


def readable_pt(fig) -> float:
    """The smallest font size (pt) that ``fig`` may use and stay readable on the book's page.

    A figure wider than the column is shrunk to it, so its text shrinks too: a 10-inch figure needs 9.6 pt where a
    7-inch one is fine with 6.7 pt (``MIN_TEXT_PX`` pixels either way, at up to 100 dpi).
    """
    inches_per_px = max(fig.get_figwidth() / COLUMN_PX, 1 / 100)
    return math.ceil(MIN_TEXT_PX * 72 * inches_per_px * 10) / 10


#: PNG text keys under which ``lh.setup()``'s inline backend stores a figure's smallest font (pt) and its dpi;
#: ``tools/browser_check.py`` reads them to check static figures on the website.
PNG_FONT_KEY, PNG_DPI_KEY = "labhelpers:min_font_pt", "labhelpers:dpi"


def _drawn_texts(artist):
    """The visible, non-empty texts under ``artist`` (not the tick labels of axes turned off)."""
    if not artist.get_visible():
        return
    if isinstance(artist, Text):
        if artist.get_text().strip():
            yield artist
        return
    children = artist.get_children()
    if isinstance(artist, Axes) and not artist.axison:
        children = [c for c in children if not isinstance(c, Axis)]
    for child in children:
        yield from _drawn_texts(child)


def smallest_font_pt(fig) -> float:
    """The smallest font size (pt) of the text ``fig`` draws (inf when it draws none); call after a draw or
    ``tight_layout`` so that the tick labels exist."""
    return min((t.get_fontsize() for t in _drawn_texts(fig)), default=math.inf)


def png_font_metadata(fig) -> dict[str, str]:
    """PNG metadata giving ``fig``'s smallest font (pt) and dpi, for the browser check's legibility test."""
    pt = smallest_font_pt(fig)
    return {PNG_DPI_KEY: f"{fig.dpi:g}"} | ({} if math.isinf(pt) else {PNG_FONT_KEY: f"{pt:g}"})


def figure_axes(ax=None, figsize: tuple[float, float] = (7, 3.5)):
    """``(figure, axes)``: the figure of ``ax``, or a new figure of ``figsize`` with one axes when ``ax`` is None.

    The figures modules' static plots take ``ax=None`` and return the Figure through this.
    """
    if ax is None:
        return plt.subplots(figsize=figsize)
    return ax.figure, ax


def figure_panels(axes=None, shape: tuple[int, int] = (1, 2), figsize: tuple[float, float] = (9.4, 3.5),
                  **subplots):
    """``(figure, axes)`` for a static figure of several panels: the figure of ``axes`` (a row of axes, or any
    sequence of ``rows x columns`` of them), or a new figure of ``figsize`` with ``shape`` panels when None.

    ``axes`` comes back shaped as ``plt.subplots(*shape, **subplots)`` would return it (one row or column: a 1-D
    array; ``squeeze=False``: 2-D). The figures modules' multi-panel plots take ``axes=None`` and go through this.

    Raises:
        ValueError: ``axes`` holds another number of axes than ``shape`` has panels.
    """
    if axes is None:
        return plt.subplots(*shape, figsize=figsize, **subplots)
    rows, cols = shape
    flat = list(np.ravel(np.asarray(axes, dtype=object)))
    if len(flat) != rows * cols:
        raise ValueError(f"this figure draws {rows} x {cols} panels: pass {rows * cols} axes, got {len(flat)}")
    given = np.empty(rows * cols, dtype=object)
    given[:] = flat
    squeeze = subplots.get("squeeze", True)
    shaped = given.reshape(rows, cols) if not squeeze or (rows > 1 and cols > 1) else given
    return flat[0].figure, shaped


def _as_measured(live: pd.DataFrame | Measured | None, reference: Reference | None) -> Measured | None:
    """What to draw as this machine's curve: a Measured (live or not), or None when there is nothing."""
    if isinstance(live, Measured):
        return live
    if live is not None and "status" in live and (reference is not None or timed_rows(live) is not None):
        return live_or_reference(live, reference)
    return None


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
) -> Figure:
    """Plot column ``y`` against ``x`` for this machine and for a reference GPU.

    Args:
        x, y: column names present in both tables.
        live: a sweep table from this machine (rows without GPU timings are ignored), or the
            :class:`~labhelpers.measured.Measured` of :func:`~labhelpers.measured.live_or_reference`
            (its reference is drawn too).
        reference: reference data (see :func:`labhelpers.refdata.load_reference`).
        group: optional column drawing one line per value.
        ax: matplotlib axes to draw on (a new figure otherwise).

    Returns:
        The Figure (its axes: ``ax``, or the one axes of the new figure, ``fig.axes[0]``).
    """
    fig, ax = figure_axes(ax, (7, 4))
    data = _as_measured(live, reference)
    if reference is None and data is not None:
        reference = data.reference
    if reference is not None:
        _draw(ax, typed_table(reference.table), x, y, group, {"linestyle": "--", "marker": "o", "markersize": 3, "alpha": 0.8},
              reference.label)
    if data is not None and data.is_live:
        _draw(ax, data.table, x, y, group, {"linestyle": "-", "marker": "s", "markersize": 4}, data.label)
    elif reference is not None:
        ax.text(0.01, 0.99, f"No GPU timings here: dashed lines are\nreference data from {reference.gpu}",
                transform=ax.transAxes, va="top", fontsize=max(8, readable_pt(ax.figure)), color="0.3")
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
        ax.legend(fontsize=max(8, readable_pt(ax.figure)))
    return fig
