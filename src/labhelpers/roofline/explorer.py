"""Chapter 7's widgets: pick what the roofline shows, and walk a kernel along the roof."""

from __future__ import annotations

import math

import ipywidgets as widgets
import numpy as np
import pandas as pd

from ..widgets import interactive_figure
from .ceilings import CEILING_NAMES, Ceilings
from .model import bound
from .plots import FONT, TITLE_FONT, _finite, plot_roofline


def roofline_explorer(ceilings: Ceilings, points: pd.DataFrame, *, datasheet: Ceilings | None = None,
                      points_label: str | None = None):
    """A widget: pick which kernels and which ceilings the roofline shows."""
    names = [str(n) for n in points["name"]] if points is not None and len(points) else []
    kernels = widgets.SelectMultiple(options=names, value=tuple(names), rows=min(8, max(2, len(names))),
                                     description="kernels")
    available = [k for k in CEILING_NAMES if _finite(ceilings.value(k))]
    roofs = widgets.SelectMultiple(options=available, value=tuple(available), rows=4, description="ceilings")
    sheet = widgets.Checkbox(value=datasheet is not None, description="datasheet", disabled=datasheet is None)

    def draw(ax, kernels, ceilings_shown, datasheet_shown):
        chosen = points[points["name"].astype(str).isin(kernels)] if names else None
        plot_roofline(ax, ceilings, chosen, memory=[k for k in ceilings_shown if k.endswith("gbs")],
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
        plot_roofline(ax, ceilings, None, memory=("dram_gbs",), compute=("fp32_gflops",), point_labels=None,
                      xlim=(1 / 8, 512))
        ok = np.isfinite(gflops)
        if ok.any():
            ax.plot(table["intensity"][ok], gflops[ok], "-", color="0.6", lw=1, label=f"sweep ({label})")
        i = values.index(nfma)
        intensity, achieved = float(table["intensity"].iloc[i]), float(gflops.iloc[i])
        roof = ceilings.attainable(intensity) if _finite(ceilings.value("dram_gbs")) else float("nan")
        ax.axvline(intensity, color="0.8", lw=0.8)
        if math.isfinite(achieved):
            ax.plot([intensity], [achieved], "o", color="k", ms=9, zorder=6)
            text = f"{nfma} FMA/element: I = {intensity:g} FLOP/B, {achieved:,.0f} GFLOP/s"
            if math.isfinite(roof):
                which = bound(intensity, ceilings.value("dram_gbs"), ceilings.value("fp32_gflops"))
                text += f" ({achieved / roof:.0%} of the roof, {which} bound)"
        else:
            text = f"{nfma} FMA/element: I = {intensity:g} FLOP/B (no timing for this point)"
        ax.set_title(text, fontsize=TITLE_FONT)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=FONT, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)

    return interactive_figure(draw, figsize=(9, 4.5), nfma=slider)
