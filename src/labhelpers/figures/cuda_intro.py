"""Chapter "CUDA in Python": the figure of SAXPY timed three ways."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd

from ..measured import Measured
from ..plotting import plot_comparison
from ..refdata import Reference


def plot_saxpy_three_ways(data: Measured | Reference, live: pd.DataFrame | None = None):
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
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.2))
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
                 fontsize=9)
    fig.tight_layout(rect=(0, 0.1 if not is_live else 0.16, 1, 1))
    if handles:
        fig.legend(handles, labels, loc="lower center", ncol=1 if not is_live else 2, fontsize=8, frameon=False)
    return fig
