"""Chapter "CUDA in Python": the figure of SAXPY timed three ways."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd

from ..plotting import plot_comparison


def plot_saxpy_three_ways(reference, live: pd.DataFrame | None = None):
    """Time and GB/s of the three SAXPY ways against n, log-log: reference dashed, this machine's sweep solid.

    Args:
        reference: the reference data ``ch01_saxpy_three_ways`` (:func:`~labhelpers.refdata.load_reference`).
        live: a :func:`~labhelpers.experiments.intro.saxpy_three_ways` table measured here, or None
            (the simulator has no timings).

    Returns:
        The matplotlib figure.
    """
    tables = [reference.table] + ([live] if live is not None else [])
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.2))
    for ax, column, ylabel in ((axes[0], "median_ms", "time per SAXPY (ms)"),
                               (axes[1], "gbps", "GB/s  (12 n bytes / time)")):
        has_data = any(t[column].astype(float).gt(0).any() for t in tables)
        plot_comparison(x="n", y=column, group="method", live=live, reference=reference, ax=ax,
                        logx=True, logy=has_data, xlabel="n (float32 elements)", ylabel=ylabel)
        if not has_data:
            ax.text(0.5, 0.5, "no timings in this reference data", transform=ax.transAxes, ha="center", color="0.4")
    handles, labels = axes[1].get_legend_handles_labels()
    for ax in axes:
        if ax.get_legend() is not None:
            ax.get_legend().remove()
    fig.suptitle(f"SAXPY three ways. {reference.provenance}", fontsize=9)
    fig.tight_layout(rect=(0, 0.1 if live is None else 0.16, 1, 1))
    if handles:
        fig.legend(handles, labels, loc="lower center", ncol=1 if live is None else 2, fontsize=8, frameon=False)
    return fig
