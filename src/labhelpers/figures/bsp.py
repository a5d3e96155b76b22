"""Chapter 2's figures (BSP and Amdahl): the multithreading model drawn cycle by cycle.

Widget draw functions take the axes first, ``draw_x(ax, **params) -> None``, as
:func:`labhelpers.interactive_figure` calls them.
"""

from __future__ import annotations

import matplotlib.colors as mcolors
import numpy as np
from matplotlib.patches import Rectangle

from ..models.bsp import MULTITHREADING_KINDS, simulate_multithreading
from ..plotting import readable_pt


def draw_multithreading(ax, threads: int = 6, stall: int = 8, switch: int = 2, *, width: int = 4, ilp: int = 2,
                        burst: int = 8, cycles: int = 36) -> None:
    """Draw the four kinds side by side: time runs down, one column per issue slot, one colour per thread."""
    colours = ["white"] + [f"C{t % 10}" for t in range(threads)]
    cmap = mcolors.ListedColormap(colours)
    gap = 1
    panels = []
    for kind in MULTITHREADING_KINDS:
        trace = simulate_multithreading(kind, threads, width=width, ilp=ilp, burst=burst, stall=stall,
                                        switch=switch, cycles=cycles)
        panels.append(trace)
    image = np.full((cycles, len(panels) * (width + gap) - gap), np.nan)
    for k, trace in enumerate(panels):
        image[:, k * (width + gap):k * (width + gap) + width] = trace.slots + 1
    ax.imshow(np.ma.masked_invalid(image), cmap=cmap, vmin=0, vmax=threads, aspect="auto", interpolation="nearest")
    for k, trace in enumerate(panels):
        left = k * (width + gap) - 0.5
        ax.add_patch(Rectangle((left, -0.5), width, cycles, fill=False, edgecolor="0.3", linewidth=0.8))
        ax.text(left + width / 2, -1.0, f"{trace.kind}\n{trace.utilisation:.0%} of slots", ha="center",
                va="bottom", fontsize=max(8, readable_pt(ax.figure)))
    ax.set_xticks([])
    ax.set_ylabel("cycle")
    ax.set_ylim(cycles - 0.5, -4)
    ax.set_title(f"{threads} threads, issue width {width}, ILP {ilp}: bursts of {burst}, stalls of {stall} cycles, "
                 f"switch {switch}", fontsize=max(8, readable_pt(ax.figure)))
    for side in ("top", "right", "bottom"):
        ax.spines[side].set_visible(False)


__all__ = ["draw_multithreading"]
