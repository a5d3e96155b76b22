"""Chapter "Profiling and the roofline", section 2, the stopwatch: one copy kernel timed with four clocks.

:func:`plot_stopwatch` draws a :func:`labhelpers.experiments.roofline_stopwatch.stopwatch_sweep` table (measured here or
the reference ``ch07_stopwatch``) and returns the Figure; ``label`` names where the numbers come from.
"""

from __future__ import annotations

from matplotlib.figure import Figure
import numpy as np
import pandas as pd

from ..plotting import figure_panels, readable_pt
from ..experiments.roofline_stopwatch import CLOCKS, HELD_EVENTS, HOST_CLOCK, PROFILER, PYTHON_EVENTS

#: One colour and marker per clock.
CLOCK_STYLE = {
    HOST_CLOCK: ("#9467bd", "s"),
    PYTHON_EVENTS: ("#d62728", "o"),
    HELD_EVENTS: ("#1f77b4", "o"),
    PROFILER: ("#2ca02c", "x"),
}
NOT_MEASURED = "not measured"


def _ok(table: pd.DataFrame) -> pd.DataFrame:
    t = table[table["status"] == "ok"].copy()
    t["median_ms"] = pd.to_numeric(t["median_ms"], errors="coerce")
    return t[t["median_ms"] > 0]


def plot_stopwatch(table: pd.DataFrame, *, label: str = "", axes=None) -> Figure:
    """Left: microseconds per copy against size under each clock (log-log). Right: each clock over the held events.

    A clock without numbers (the profiler where ``ncu`` could not run) is left out of the legend; a table
    without any numbers draws "not measured" on both panels.

    Args:
        table: the stopwatch's table (``experiments.roofline_stopwatch``).
        label: where the numbers come from (the GPU, or the reference data and its date).
        axes: two axes to draw on (left, right), or None for a new figure.

    Returns:
        The matplotlib figure.
    """
    fig, (left, right) = figure_panels(axes, (1, 2), figsize=(9.4, 4.2))  # no wider: 10 pt ticks stay readable
    small = readable_pt(fig)
    ok = _ok(table)
    held = ok[ok["clock"] == HELD_EVENTS].set_index("n")["median_ms"]
    for clock in CLOCKS:
        part = ok[ok["clock"] == clock].sort_values("n")
        if part.empty:
            continue
        color, marker = CLOCK_STYLE[clock]
        style = "--" if clock == PROFILER else "-"
        left.plot(part["n"], part["median_ms"] * 1e3, style, marker=marker, ms=4, color=color, label=clock)
        ratio = part["median_ms"].to_numpy() / held.reindex(part["n"]).to_numpy()
        if np.isfinite(ratio).any():
            right.plot(part["n"], ratio, style, marker=marker, ms=4, color=color, label=clock)
    for ax in (left, right):
        ax.set_xscale("log", base=2)
        ax.set_xlabel("float32 elements copied (n)")
        ax.grid(True, which="major", alpha=0.3)
        if ok.empty:
            ax.text(0.5, 0.5, NOT_MEASURED, transform=ax.transAxes, ha="center", va="center", color="0.4")
    left.set_ylabel("µs per copy")
    right.set_ylabel(f"time / {HELD_EVENTS}")
    right.axhline(1.0, color="0.3", lw=0.8, ls=":")
    if not ok.empty:
        left.set_yscale("log")
        left.legend(fontsize=max(8, small), loc="upper left")
    left.set_title(f"One copy kernel, four clocks\n({label})" if label else "One copy kernel, four clocks",
                   fontsize=max(9, small))
    right.set_title("What each clock adds to the GPU's time", fontsize=max(9, small))
    fig.tight_layout()
    return fig
