"""Chapter "Beyond one GPU": figures.

Static figures ``plot_x(..., *, ax=None, label=...) -> Figure``: the split of a grid into slabs with ghost rows
(:func:`plot_split`), collective bus bandwidth against message size (:func:`plot_collectives`), strong and weak
scaling (:func:`plot_scaling`), and the GPUs' links as the driver reports them (:func:`plot_topology`). The models
come from :mod:`labhelpers.models.multi_gpu`; a measured table (a ``Measured``'s or a ``Reference``'s) is drawn
beside them, labelled with ``label``. The widget drawer :func:`draw_scaling` redraws the model's scaling.
"""

from __future__ import annotations

import math
from typing import Sequence

import pandas as pd
from matplotlib import patches
from matplotlib.figure import Figure

from ..kernels import multi_gpu as kmg
from ..models import multi_gpu as model
from ..plotting import figure_axes, readable_pt

SLAB_COLORS = ("#4c78a8", "#f58518", "#54a24b", "#b279a2", "#e45756", "#72b7b2", "#eeca3b", "#9d755d")


def plot_split(ny: int, gpus: int | Sequence[int], *, ax=None, label: str = "") -> Figure:
    """The rows of an ``ny``-row grid split over GPUs (:func:`~labhelpers.kernels.multi_gpu.split_rows`): each
    slab's own rows filled, its ghost rows hatched, arrows for the copies of one halo exchange."""
    parts = kmg.split_rows(ny, gpus)
    fig, ax = figure_axes(ax, (7, 0.5 + 0.32 * (ny + 2 * len(parts))))
    y = 0.0
    tops = []
    for k, (first, h) in enumerate(parts):
        color = SLAB_COLORS[k % len(SLAB_COLORS)]
        for r in range(h + 2):
            ghost = r in (0, h + 1)
            ax.add_patch(patches.Rectangle((k * 1.6, y - r), 1.2, 0.9, facecolor="white" if ghost else color,
                                           edgecolor=color, hatch="//" if ghost else None, alpha=1.0 if ghost else 0.8))
            text = "ghost" if ghost else f"row {first + r - 1}"
            ax.text(k * 1.6 + 0.6, y - r + 0.45, text, ha="center", va="center", fontsize=7,
                    color="black" if ghost else "white")
        ax.text(k * 1.6 + 0.6, y + 1.2, f"GPU {k}: {h} row{'s' if h > 1 else ''}", ha="center", fontsize=8)
        tops.append((y, h))
        y -= h
    for c in kmg.halo_plan([h for _f, h in parts]):
        y_src, _ = tops[c.src]
        y_dst, _ = tops[c.dst]
        forward = c.dst > c.src  # to the next GPU: leave from the right edge, arrive at the left edge
        ax.annotate("", xy=(c.dst * 1.6 + (0.0 if forward else 1.2), y_dst - c.dst_row + 0.45),
                    xytext=(c.src * 1.6 + (1.2 if forward else 0.0), y_src - c.src_row + 0.45),
                    arrowprops=dict(arrowstyle="->", color="black", lw=0.8))
    ax.set_xlim(-0.3, len(parts) * 1.6)
    ax.set_ylim(y - 2.5, 2.0)
    ax.set_axis_off()
    ax.set_title(label or f"{ny} rows over {len(parts)} GPUs: own rows filled, ghost rows hatched, "
                          "arrows = one halo exchange", fontsize=9)
    return fig


def plot_collectives(n: int, *, link_gbs: float, latency_us: float, table: pd.DataFrame | None = None,
                     collective: str = "all_reduce", ax=None, label: str = "") -> Figure:
    """Bus bandwidth against message size: the ring and tree models for ``n`` GPUs (dashed), and the rows of a
    measured ``table`` (:func:`labhelpers.experiments.multi_gpu.collectives_table`) labelled ``label``."""
    fig, ax = figure_axes(ax)
    sizes = [2**k for k in range(3, 31)]
    algorithms = ("ring", "tree") if collective == "all_reduce" else ("ring",)
    modelled = model.collective_table(collective, sizes, n, link_gbs=link_gbs, latency_us=latency_us,
                                      algorithms=algorithms)
    for algorithm, part in modelled.groupby("algorithm", sort=False):
        ax.plot(part["nbytes"], part["busbw_gbs"], "--", lw=1.2, label=f"model: {algorithm}, {n} GPUs")
    if table is not None:
        part = table[(table["collective"] == collective) & (table["gpus"] == n)].sort_values("nbytes")
        ax.plot(part["nbytes"], part["busbw_gbs"], "o-", ms=3.5, label=label or "measured")
    ax.axhline(link_gbs, color="grey", lw=0.8, ls=":")
    small = max(8, readable_pt(fig))  # 8 pt, or more in a wide figure the page shrinks
    ax.text(sizes[0], link_gbs, f" link {link_gbs:g} GB/s", va="bottom", fontsize=small, color="grey")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("message size S (bytes)")
    ax.set_ylabel("bus bandwidth (GB/s)")
    ax.set_title(f"{collective.replace('_', '-')}: busbw = S / t x factor", fontsize=max(10, small))
    ax.legend(fontsize=small)
    return fig


def draw_scaling(ax, *, ny: int, nx: int, mode: str = "weak", mem_gbs: float, link_gbs: float,
                 latency_us: float = 10.0, issue_us: float = 0.0, max_gpus: int = 8) -> None:
    """The model's efficiency against GPUs (1 .. ``max_gpus``), with and without overlap (widget drawer)."""
    machine = model.HaloMachine(mem_gbs, link_gbs, latency_us, issue_us)
    gpus = list(range(1, max_gpus + 1))
    for overlap, style in ((True, "-"), (False, "--")):
        t = model.scaling_table(ny, nx, gpus, machine, mode=mode, overlap=overlap)
        ax.plot(t["gpus"], t["efficiency"], style, marker=".", label=f"model, {'overlap' if overlap else 'no overlap'}")
    ax.set_ylim(0, 1.05)
    ax.set_xlabel("GPUs")
    ax.set_ylabel("efficiency")
    ax.set_title(f"{mode} scaling of the split Jacobi step ({ny} x {nx}{' per GPU' if mode == 'weak' else ''})",
                 fontsize=10)


def plot_scaling(machine: model.HaloMachine, ny: int, nx: int, *, mode: str = "weak",
                 table: pd.DataFrame | None = None, ax=None, label: str = "") -> Figure:
    """Efficiency against GPUs: the halo model (with and without overlap) and a measured ``table``
    (:func:`labhelpers.experiments.multi_gpu.jacobi_scaling_table`) labelled ``label``."""
    fig, ax = figure_axes(ax)
    draw_scaling(ax, ny=ny, nx=nx, mode=mode, mem_gbs=machine.mem_gbs, link_gbs=machine.link_gbs,
                 latency_us=machine.latency_us, issue_us=machine.issue_us, max_gpus=4)
    if table is not None:
        for overlap, part in table[table["mode"] == mode].groupby("overlap"):
            ax.plot(part["gpus"], part["efficiency"], "o", ms=6, fillstyle="full" if overlap else "none",
                    label=f"{label or 'measured'}, {'overlap' if overlap else 'no overlap'}")
    ax.legend(fontsize=max(8, readable_pt(fig)))  # 8 pt, or more in a wide figure the page shrinks
    return fig


def plot_topology(table: pd.DataFrame, *, ax=None, label: str = "") -> Figure:
    """The GPUs of a topology table (:func:`labhelpers.experiments.multi_gpu.topology_table`) on a circle, one
    line per pair labelled with its link (``NV<k>``: k NVLinks; ``SYS``, ``PIX``...: a PCIe path)."""
    fig, ax = figure_axes(ax, (4.5, 4.5))
    gpus = sorted(set(table["a"]) | set(table["b"]))
    where = {g: (math.cos(2 * math.pi * i / len(gpus)), math.sin(2 * math.pi * i / len(gpus)))
             for i, g in enumerate(gpus)}
    for _, r in table[table["a"] < table["b"]].iterrows():
        (x0, y0), (x1, y1) = where[r["a"]], where[r["b"]]
        nvlink = str(r["link"]).startswith("NV")
        ax.plot([x0, x1], [y0, y1], "-" if nvlink else ":", color="#4c78a8" if nvlink else "grey", lw=2)
        ax.text((x0 + x1) / 2, (y0 + y1) / 2, f"{r['link']}{'' if r['peer_access'] else ' (no peer)'}",
                fontsize=8, ha="center", va="center", bbox=dict(facecolor="white", edgecolor="none", pad=1))
    for g, (x, y) in where.items():
        ax.add_patch(patches.Circle((x, y), 0.18, color="#f58518"))
        ax.text(x, y, f"GPU {g}", ha="center", va="center", fontsize=8, color="white")
    ax.set_xlim(-1.4, 1.4)
    ax.set_ylim(-1.4, 1.4)
    ax.set_aspect("equal")
    ax.set_axis_off()
    peak = table["nvlink_peak_gbs"].dropna()
    extra = f"; NVLink peak {float(peak.iloc[0]):.0f} GB/s per direction" if len(peak) else ""
    ax.set_title(f"{label}{extra}", fontsize=9)
    return fig


__all__ = ["draw_scaling", "plot_collectives", "plot_scaling", "plot_split", "plot_topology"]
