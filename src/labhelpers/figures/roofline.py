"""Chapter 7's figures (profiling and the roofline): the plots of the chapter's measurements and its two widgets.

The roofline itself is drawn by the one roofline plotter, :func:`labhelpers.roofline.draw_roofline`, which
chapters 5, 7, 8 and 9 share. Each static plot here is ``plot_x(table, *, ax=None, label=..., ...) -> Figure``:
it draws on ``ax`` (a new figure of the chapter's size when None) and returns its Figure; tables may hold NaN
timings (the simulator's sweeps), which are skipped or said to be missing. The widgets return :func:`labhelpers.interactive_figure`'s widget.
"""

from __future__ import annotations

import math

import ipywidgets as widgets
import matplotlib.ticker as mticker
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from ..plotting import figure_axes, readable_pt
from ..roofline.ceilings import CEILING_NAMES, LIBRARY, Ceilings
from ..roofline.model import bound
from ..roofline.draw import FONT, TITLE_FONT, draw_roofline, finite_positive
from ..widgets import interactive_figure


def plot_sweep_times(table: pd.DataFrame, *, ax=None, label: str, ridge_nfma: float | None = None,
                     ridge_label: str = "ridge") -> Figure:
    """Time per launch against FMAs per element for the intensity sweep, with an optional ridge line."""
    fig, ax = figure_axes(ax, (7, 3.2))
    ms = pd.to_numeric(table["median_ms"], errors="coerce")
    ok = np.isfinite(ms) & (ms > 0)
    ax.plot(table["nfma"], ms, "o-", label=f"measured ({label})")
    if ridge_nfma is not None and math.isfinite(ridge_nfma) and ridge_nfma > 0:
        ax.axvline(ridge_nfma, color="C3", ls="--", label=f"{ridge_label}: {ridge_nfma:.0f} FMA/element")
    ax.set_xscale("log", base=2)
    if ok.any():
        ax.set_yscale("log")
        ax.yaxis.set_major_locator(mticker.LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
        ax.yaxis.set_major_formatter(mticker.FormatStrFormatter("%g"))
        ax.yaxis.set_minor_formatter(mticker.NullFormatter())
    else:
        ax.text(0.5, 0.5, "no timings in this table", transform=ax.transAxes, ha="center")
    ax.set_xlabel("FMAs per element (nfma)")
    ax.set_ylabel("ms per launch")
    ax.set_title(f"fma_per_element, 2^26 float32 ({label})", fontsize=TITLE_FONT)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=FONT, loc="upper left")
    return fig


def plot_timing_hygiene(table: pd.DataFrame, *, ax=None, label: str) -> Figure:
    """Bar chart of :func:`~labhelpers.experiments.roofline.timing_hygiene`'s four numbers (log scale)."""
    new = ax is None
    fig, ax = figure_axes(ax, (8, 2.8))
    font = max(FONT, readable_pt(fig))
    ms = pd.to_numeric(table["ms"], errors="coerce")
    ax.barh(range(len(table)), ms.fillna(0), color=["C3", "C1", "C0", "C2"][: len(table)])
    ax.set_yticks(range(len(table)), table["measurement"], fontsize=font)
    ax.invert_yaxis()
    if (ms > 0).any():
        ax.set_xscale("log")
    else:
        ax.text(0.5, 0.5, "no timings in this table", transform=ax.transAxes, ha="center")
    for i, v in enumerate(ms):
        if math.isfinite(v):
            ax.text(v, i, f" {v:,.3g} ms", va="center", fontsize=font)
    ax.set_xlabel("milliseconds (log scale)")
    ax.set_title(f"One kernel, four clocks ({label})", fontsize=max(TITLE_FONT, font))
    if new:  # the long names inside the figure, which the page shrinks by its width
        fig.tight_layout()
    return fig


def plot_copy_variants(table: pd.DataFrame, *, ax=None, label: str, datasheet_gbs: float | None = None) -> Figure:
    """Horizontal bars: GB/s of each copy tried for the copy ceiling, fastest on top (green: the one kept)."""
    new = ax is None
    fig, ax = figure_axes(ax, (8, 3.4))
    font = max(FONT, readable_pt(fig))
    if not len(table):
        ax.text(0.5, 0.5, f"nothing to show ({label})", transform=ax.transAxes, ha="center", fontsize=font)
        ax.set_axis_off()
        return fig
    table = table.assign(gbps=pd.to_numeric(table["gbps"], errors="coerce")).sort_values(
        "gbps", ascending=True, ignore_index=True)

    def name(row) -> str:
        if row["grid"] == LIBRARY or not finite_positive(row.get("access_bytes")):
            return str(row["kernel"])
        grid = ("one wave, grid-stride" if row["grid"] == "one wave" else str(row["grid"]))
        return f"{row['kernel']}: {int(row['access_bytes'])} B/access, {grid}, {int(row['threads'])} thr/block"

    best = table["gbps"].idxmax()
    library = table["grid"] == LIBRARY
    colors = ["C2" if i == best else ("0.6" if lib else "C0") for i, lib in zip(table.index, library)]
    ax.barh(range(len(table)), table["gbps"].fillna(0), color=colors)
    ax.set_yticks(range(len(table)), [name(r) for _, r in table.iterrows()], fontsize=font)
    for i, v in enumerate(table["gbps"]):
        if finite_positive(v):
            ax.text(v, i, f" {v:,.0f}", va="center", fontsize=font)
    if datasheet_gbs:
        ax.axvline(datasheet_gbs, color="0.4", ls="--", lw=1, label=f"datasheet: {datasheet_gbs:,.0f} GB/s")
        ax.legend(fontsize=font, loc="lower right")
    ax.set_xlim(0, max(float(table["gbps"].max()), datasheet_gbs or 0) * 1.12)
    ax.set_xlabel("GB/s (bytes read + written, 1 GiB copied)")
    ax.set_title(f"Copies tried for the copy ceiling; green: the fastest, kept\n({label})",
                 fontsize=max(TITLE_FONT, font))
    if new:  # the long names inside the figure, which the page shrinks by its width
        fig.tight_layout()
    return fig


def plot_skewed_gemm(table: pd.DataFrame, *, axes=None, label: str, ceilings: Ceilings | None = None) -> Figure:
    """The skewed GEMM: GFLOP/s per shape (left) and the same shapes on the roofline (right).

    ``axes``: a pair of axes to draw on (a new 9.4 x 5.2 figure of two when None; its layout is then tightened).
    """
    new = axes is None
    if new:  # no wider: the page shrinks a wider figure, and its 10 pt ticks with it
        _, axes = plt.subplots(1, 2, figsize=(9.4, 5.2))
    left, right = axes
    font = max(FONT, readable_pt(left.figure))
    g = pd.to_numeric(table["gflops"], errors="coerce")
    left.bar(range(len(table)), g.fillna(0), color="C0")
    left.set_xticks(range(len(table)), table["shape"], rotation=60, ha="right", fontsize=font)
    left.set_ylabel("GFLOP/s")
    left.set_xlabel("m-n-k (m x n constant, k = %d)" % int(table["k"].iloc[0]))
    left.set_title(f"cupy.matmul, float32\n({label})", fontsize=max(TITLE_FONT, font))
    if ceilings is not None:
        pts = table.assign(name=[f"n={int(v)}" for v in table["n"]])
        ok = np.isfinite(g) & (g > 0)
        if ok.any():  # the path the shapes take as n shrinks
            right.plot(pts["intensity"][ok], g[ok], "-", color="0.75", lw=1, zorder=4)
        draw_roofline(right, ceilings, pts, memory=("dram_gbs", "l2_gbs"), compute=("fp32_gflops",),
                      points_label=f"shapes ({label})", xlim=(1 / 4, 1024), legend="below",
                      point_labels="beside")
        right.set_title("the same shapes on the roofline\n(labels: n; m x n and k = 1024 fixed)",
                        fontsize=max(TITLE_FONT, font))
        # one column: the roofline's two would reach past the figure, which the page then shrinks
        right.legend(fontsize=font, loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=1)
    if new:
        left.figure.tight_layout()
    return left.figure


#: The lines of :func:`plot_fft_crossover`: column, legend text, style.
_FFT_LINES = (("numpy_ms", "numpy.fft.fft (CPU, one core)", "o-"),
              ("cupy_ms", "cupy.fft.fft, data on the GPU", "s-"),
              ("cupy_copies_ms", "cupy.fft.fft with the copies in and out", "^-"))


def plot_fft_crossover(table: pd.DataFrame, *, ax=None, label: str, lecture_n: float | None = None,
                       crossovers: dict[str, float] | None = None) -> Figure:
    """Time per FFT against its length ``n`` (log-log) for the CPU and the GPU, with the crossover points.

    ``table``: :func:`~labhelpers.experiments.roofline.fft_crossover`'s columns; ``lecture_n``: a length to mark
    (the lecture's crossover); ``crossovers``: ``fft_crossover_points``' dict, each finite one marked on its line.
    """
    fig, ax = figure_axes(ax, (8, 4.5))
    if not len(table):
        ax.text(0.5, 0.5, f"nothing to show ({label})", transform=ax.transAxes, ha="center", fontsize=FONT)
        ax.set_axis_off()
        return fig
    table = table.sort_values("n")
    for column, name, style in _FFT_LINES:
        ax.plot(table["n"], pd.to_numeric(table[column], errors="coerce"), style, ms=4, label=name)
    for key, color, what in (("on_gpu", "C1", "data on the GPU"), ("with_copies", "C2", "with copies")):
        n = (crossovers or {}).get(key, float("nan"))
        if finite_positive(n):
            ax.axvline(n, color=color, ls=":", lw=1.2, label=f"GPU faster from n = {n:,.0f} ({what})")
    if lecture_n:
        ax.axvline(lecture_n, color="0.4", ls="--", lw=1, label=f"the lecture's crossover: {lecture_n:,.0f}")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.yaxis.set_major_formatter(mticker.FormatStrFormatter("%g"))
    ax.set_xlabel("FFT length n (complex64)")
    ax.set_ylabel("ms per FFT")
    ax.set_title(f"One FFT, CPU against GPU ({label})", fontsize=TITLE_FONT)
    ax.legend(fontsize=FONT, loc="upper left")
    return fig


def roofline_explorer(ceilings: Ceilings, points: pd.DataFrame, *, datasheet: Ceilings | None = None,
                      points_label: str | None = None):
    """A widget: pick which kernels and which ceilings the roofline shows."""
    names = [str(n) for n in points["name"]] if points is not None and len(points) else []
    kernels = widgets.SelectMultiple(options=names, value=tuple(names), rows=min(8, max(2, len(names))),
                                     description="kernels")
    available = [k for k in CEILING_NAMES if finite_positive(ceilings.value(k))]
    roofs = widgets.SelectMultiple(options=available, value=tuple(available), rows=4, description="ceilings")
    sheet = widgets.Checkbox(value=datasheet is not None, description="datasheet", disabled=datasheet is None)

    def draw(ax, kernels, ceilings_shown, datasheet_shown):
        chosen = points[points["name"].astype(str).isin(kernels)] if names else None
        draw_roofline(ax, ceilings, chosen, memory=[k for k in ceilings_shown if k.endswith("gbs")],
                      compute=[k for k in ceilings_shown if k.endswith("gflops")],
                      datasheet=datasheet if datasheet_shown else None, points_label=points_label)

    return interactive_figure(draw, figsize=(10, 5), kernels=kernels, ceilings_shown=roofs, datasheet_shown=sheet)


def sweep_explorer(ceilings: Ceilings, table: pd.DataFrame, label: str):
    """A widget: a slider over the FMA count of the intensity sweep; the kernel's point moves along the roof."""
    values = [int(v) for v in table["nfma"]]
    start = values[len(values) // 2] if values else 0
    slider = widgets.SelectionSlider(options=values, value=start, description="FMA/elem", continuous_update=False)
    gflops = pd.to_numeric(table["gflops"], errors="coerce")

    def draw(ax, nfma):
        draw_roofline(ax, ceilings, None, memory=("dram_gbs",), compute=("fp32_gflops",), point_labels=None,
                      xlim=(1 / 8, 512))
        ok = np.isfinite(gflops)
        if ok.any():
            ax.plot(table["intensity"][ok], gflops[ok], "-", color="0.6", lw=1, label=f"sweep ({label})")
        i = values.index(nfma)
        intensity, achieved = float(table["intensity"].iloc[i]), float(gflops.iloc[i])
        roof = ceilings.attainable(intensity) if finite_positive(ceilings.value("dram_gbs")) else float("nan")
        ax.axvline(intensity, color="0.8", lw=0.8)
        if math.isfinite(achieved):
            ax.plot([intensity], [achieved], "o", color="k", ms=9, zorder=6)
            text = f"{nfma} FMA/element: I = {intensity:g} FLOP/B, {achieved:,.0f} GFLOP/s"
            if math.isfinite(roof):
                which = bound(intensity, ceilings.value("dram_gbs"), ceilings.value("fp32_gflops"))
                text += f" ({achieved / roof:.0%} of the roof, {which} bound)"
        else:
            text = f"{nfma} FMA/element: I = {intensity:g} FLOP/B (no timing for this point)"
        small = max(FONT, readable_pt(ax.figure))
        ax.set_title(text, fontsize=max(TITLE_FONT, small))
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=small, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)

    return interactive_figure(draw, figsize=(9, 4.5), nfma=slider)


__all__ = ["plot_copy_variants", "plot_fft_crossover", "plot_skewed_gemm", "plot_sweep_times", "plot_timing_hygiene",
           "roofline_explorer", "sweep_explorer"]
