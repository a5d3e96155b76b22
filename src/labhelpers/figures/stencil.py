"""Chapter "Stencils, halos and connected components": figures and widget draw functions.

Static figures: ``plot_x(data..., *, ax=None, label=...) -> Figure`` (a new figure of the size the chapter shows
when ``ax`` is None); widget drawers: ``draw_x(ax, **params) -> None``, as :func:`labhelpers.interactive_figure`
calls them (the snapshots a widget shows are keyword arguments, bound with :func:`functools.partial`). Measured
tables come from :mod:`labhelpers.experiments.stencil` or from the reference data
``ch09_*``; their label (``this GPU: ...`` or ``reference: ...``) goes into the title.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib import colors, patches
from matplotlib.figure import Figure

from ..kernels import stencil_labelling as lbl
from ..kernels import stencil as st
from ..models import stencil as model
from ..plotting import figure_axes, figure_panels, readable_pt
from ..roofline.draw import draw_roofline, table_ceilings

HALO = "#f4a259"
OWN = "#5b8fd6"
STRIDED = "#d1495b"


def draw_tile_1d(ax, threads: int = 16, radius: int = 3) -> None:
    """The shared tile of one block: ``radius`` halo words on each side of the block's ``threads`` words.

    Each word is loaded once; the title compares loads per output with the ``2R + 1`` reads per
    output of the kernel without a tile.
    """
    m = model.tile_1d(threads, radius)
    small = readable_pt(ax.figure)
    words = m["words"]
    for w in range(words):
        halo = w < radius or w >= radius + threads
        ax.add_patch(patches.Rectangle((w, 0), 0.92, 1, color=HALO if halo else OWN, lw=0))
    if words <= 48:
        for w in range(words):
            ax.text(w + 0.46, 0.5, str(w - radius), ha="center", va="center", fontsize=max(7, small),
                    color="white")
    ax.set_xlim(-0.5, max(words, 8) + 0.5)
    ax.set_ylim(-1.2, 1.6)
    ax.set_yticks([])
    ax.set_xlabel("tile word (numbers: offset from the block's first element)")
    ax.legend(handles=[patches.Patch(color=OWN, label=f"the block's {threads} elements"),
                       patches.Patch(color=HALO, label=f"halo: {radius} on each side")],
              loc="lower center", ncol=2, fontsize=max(8, small), frameon=False, bbox_to_anchor=(0.5, -0.05))
    ax.set_title(f"block of {threads} threads, radius {radius}: {words} loads for {threads} outputs = "
                 f"{m['loads_per_output']:.2f} per output (without a tile: {m['global_reads_per_output']} reads "
                 "per output)", fontsize=max(9, small))
    for side in ("top", "right", "left"):
        ax.spines[side].set_visible(False)


def plot_tile_2d(bx: int = 8, by: int = 4, *, ax=None) -> Figure:
    """The 2D tile of a 5-point stencil: the block's points, halo rows (coalesced) and halo columns (strided)."""
    fig, ax = figure_axes(ax, (7, 3.8))
    m = model.tile_2d(bx, by)
    for r in range(by + 2):
        for c in range(bx + 2):
            corner = r in (0, by + 1) and c in (0, bx + 1)
            if corner:
                continue
            if 0 < r < by + 1 and 0 < c < bx + 1:
                color = OWN
            elif c in (0, bx + 1):
                color = STRIDED
            else:
                color = HALO
            ax.add_patch(patches.Rectangle((c, by + 1 - r), 0.92, 0.92, color=color, lw=0))
    ax.set_xlim(-0.5, bx + 2.5)
    ax.set_ylim(-0.5, by + 2.5)
    ax.set_aspect("equal")
    ax.axis("off")
    ax.legend(handles=[patches.Patch(color=OWN, label="the block's points"),
                       patches.Patch(color=HALO, label="halo rows: contiguous, coalesced"),
                       patches.Patch(color=STRIDED, label="halo columns: one float per row")],
              loc="upper center", bbox_to_anchor=(0.5, 0.0), ncol=3, fontsize=8, frameon=False)
    ax.set_title(f"{bx}x{by} block: {m['loads_per_point']:.2f} loads per point, "
                 f"{m['sector_efficiency']:.0%} of the bytes moved are used", fontsize=9)
    return fig


def plot_heat(field: np.ndarray, steps: int, *, ax=None, vmax: float = 100.0) -> Figure:
    """A temperature field as an image (hot = bright), after ``steps`` Jacobi steps."""
    fig, ax = figure_axes(ax, (5.4, 4.3))
    im = ax.imshow(field, cmap="inferno", vmin=0, vmax=vmax, interpolation="nearest")
    ax.figure.colorbar(im, ax=ax, fraction=0.046, pad=0.04, label="temperature")
    ax.set_xticks([])
    ax.set_yticks([])
    ax.set_title(f"after {steps} Jacobi steps", fontsize=10)
    return fig


def draw_heat(ax, steps: int, *, snapshots: dict[int, np.ndarray], vmax: float = 100.0) -> None:
    """The heat widget: :func:`plot_heat` of the snapshot nearest ``steps`` (bind ``snapshots``, a dict from the
    number of Jacobi steps to the field, with :func:`functools.partial`)."""
    k = min(snapshots, key=lambda s: (abs(s - steps), s))
    plot_heat(snapshots[k], k, ax=ax, vmax=vmax)


def plot_photo_filters(img: np.ndarray, blurred: np.ndarray, edges: np.ndarray, title: str = "", *,
                       axes=None) -> Figure:
    """The photograph, its box blur and its Sobel edge magnitude side by side. Returns the Figure."""
    fig, axes = figure_panels(axes, (1, 3), (9.4, 3.8))  # no wider: the page shrinks a wider figure
    small = readable_pt(fig)  # no smaller: the page shrinks a wide figure and its text
    for ax, a, name, cmap in ((axes[0], img, "original", "gray"), (axes[1], blurred, "3x3 box blur", "gray"),
                              (axes[2], edges, "Sobel magnitude", "magma")):
        ax.imshow(a, cmap=cmap, interpolation="nearest")
        ax.set_title(f"{name} ({a.shape[0]}x{a.shape[1]})", fontsize=max(10, small))
        ax.axis("off")
    if title:
        fig.suptitle(title, fontsize=max(9, small))
    fig.tight_layout()
    return fig


def _kernel_rows(table: pd.DataFrame) -> pd.DataFrame:
    rows = table[~table["variant"].isin(["copy", "fp32 FMA peak"])].dropna(subset=["gbps"])
    return rows


def plot_jacobi_bandwidth(table: pd.DataFrame, *, ax=None, label: str) -> Figure:
    """Effective bandwidth of every Jacobi kernel (and the CuPy step) against the copy of the same grid.

    A new figure (``ax`` None) is 8 inches wide, 0.35 inch per kernel high, with its layout tightened.
    """
    rows = _kernel_rows(table)
    copy = table.loc[table["variant"] == "copy", "gbps"]
    copy_gbs = float(copy.iloc[0]) if len(copy) and pd.notna(copy.iloc[0]) else float("nan")
    new = ax is None
    fig, ax = figure_axes(ax, (8, 0.35 * max(len(rows), 4) + 1.2))
    small = readable_pt(fig)  # no smaller: the page shrinks a wide figure and its text
    palette = {"naive": "C0", "shared": "C1", "marching": "C2", "vec4_march": "C4"}
    y = np.arange(len(rows))
    ax.barh(y, rows["gbps"].astype(float), color=[palette.get(v, "0.5") for v in rows["variant"]])
    ax.set_yticks(y, rows["kernel"], fontsize=max(8, small))
    ax.invert_yaxis()
    if np.isfinite(copy_gbs):
        ax.axvline(copy_gbs, color="C3", ls="--", lw=1.2, label=f"copy of the same grid: {copy_gbs:,.0f} GB/s")
        for yy, g in zip(y, rows["gbps"].astype(float)):
            ax.text(g, yy, f" {g / copy_gbs:.0%}", va="center", fontsize=max(7, small))
        ax.legend(fontsize=max(8, small), loc="lower right")
    ax.set_xlabel("effective bandwidth, GB/s (8 bytes per point / time of one step)")
    ax.set_title(f"One Jacobi step on a {int(table['n'].iloc[0])}² float32 grid\n{label}", fontsize=max(9, small))
    if new:
        fig.tight_layout()
    return fig


def plot_jacobi_roofline(table: pd.DataFrame, *, ax=None, label: str) -> Figure:
    """The roofline (copy bandwidth, FP32 FMA peak, both from ``table``) with every Jacobi kernel at 0.5 flop/B.

    Drawn by the one roofline plotter, :func:`labhelpers.roofline.draw_roofline`.
    """
    fig, ax = figure_axes(ax, (7.5, 4.4))
    small = readable_pt(fig)  # no smaller: the page shrinks a wide figure and its text
    copy = float(table.loc[table["variant"] == "copy", "gbps"].iloc[0])
    peak_rows = table.loc[table["variant"] == "fp32 FMA peak", "gflops"]
    peak = float(peak_rows.iloc[0]) if len(peak_rows) else float("nan")
    rows = _kernel_rows(table)
    intensity = st.JACOBI_FLOPS_PER_POINT / st.JACOBI_BYTES_PER_POINT
    points = pd.DataFrame({"name": list(rows["kernel"]), "intensity": intensity,
                           "gflops": pd.to_numeric(rows["gflops"], errors="coerce").to_numpy(dtype=float)})
    roofs = table_ceilings(label, dram_gbs=copy, fp32_gflops=peak)
    draw_roofline(ax, roofs, points, memory=("dram_gbs",), compute=("fp32_gflops",), points_label=label,
                  xlim=(1e-2, 1e3), legend="below", roof_names={"dram_gbs": "copy bandwidth"})
    ax.set_title(f"Jacobi (4 flops per 8 bytes) on the roofline\n{label}", fontsize=max(9, small))
    return fig


def label_colors(labels: np.ndarray) -> np.ndarray:
    """An RGB image: each label its own colour (a fixed pseudo-random palette), background black."""
    lab = np.asarray(labels).astype(np.int64)
    rng = np.random.default_rng(12345)
    palette = rng.uniform(0.25, 1.0, size=(4096, 3))
    rgb = palette[lab % 4096]
    rgb[lab == 0] = 0.0
    return rgb


def plot_labels(labels: np.ndarray, title: str = "", *, ax=None) -> Figure:
    """Labels as colours (background black)."""
    fig, ax = figure_axes(ax, (4, 3.2))
    ax.imshow(label_colors(labels), interpolation="nearest")
    ax.set_xticks([])
    ax.set_yticks([])
    if title:
        ax.set_title(title, fontsize=9)
    return fig


def plot_propagation_frames(mask: np.ndarray, steps=(0, 5, 20, 40), *, axes=None) -> Figure:
    """Labels of ``mask`` after each number of propagation steps (NumPy reference), side by side. Returns the Figure."""
    steps = sorted(int(s) for s in steps)
    fig, axes = figure_panels(axes, (1, len(steps)), (min(2.6 * len(steps), 9.4), 2.9))  # no wider than the page
    axes = np.atleast_1d(axes)
    lab = lbl.initial_labels(mask)
    done = 0
    for ax, k in zip(axes, steps):
        for _ in range(k - done):
            lab, _changed = lbl.propagate_reference(lab)
        done = k
        n = len(np.unique(lab[lab != 0]))
        plot_labels(lab, f"after {k} steps:\n{n} label{'s' * (n != 1)}", ax=ax)
    fig.tight_layout()
    return fig


def plot_ccl_steps(table: pd.DataFrame, *, ax=None, label: str) -> Figure:
    """Propagation steps against the image side for every shape (log-log), union-find's 3 launches beside.

    A new figure (``ax`` None) has its layout tightened.
    """
    new = ax is None
    fig, ax = figure_axes(ax, (7, 4))
    for k, (shape, part) in enumerate(table.groupby("shape", sort=False)):
        ax.loglog(part["side"], part["steps"], "o-", color=f"C{k}", label=f"propagation: {shape}")
    sides = np.array(sorted(table["side"].unique()), dtype=float)
    ax.loglog(sides, sides**2 / 2, ":", color="0.5", label="side² / 2 (half the pixels)")
    ax.loglog(sides, np.full_like(sides, 3.0), "k--", label="union-find: 3 launches")
    ax.set_xlabel("image side (pixels)")
    ax.set_ylabel("propagation steps until no label changes")
    ax.set_title(f"Label propagation needs as many steps as the longest path\n{label}", fontsize=9)
    ax.legend(fontsize=8)
    if new:
        fig.tight_layout()
    return fig


def plot_ccl_times(table: pd.DataFrame, *, ax=None, label: str) -> Figure:
    """Time of each labelling method against the density of the random image (log scale).

    A new figure (``ax`` None) has its layout tightened.
    """
    new = ax is None
    fig, ax = figure_axes(ax, (7, 4))
    for k, (method, part) in enumerate(table.groupby("method", sort=False)):
        ax.semilogy(part["density"], part["median_ms"].astype(float), "o-", color=f"C{k}", label=method)
    n = int(table["n"].iloc[0])
    ax.set_xlabel("density (fraction of foreground pixels)")
    ax.set_ylabel("time per labelling (ms)")
    ax.axvline(0.5927, color="0.6", ls=":", lw=1)
    ax.text(0.5927, ax.get_ylim()[1] * 0.6, " percolation\n threshold", fontsize=8, color="0.4")
    ax.set_title(f"Connected components of a random {n}² image\n{label}", fontsize=9)
    ax.legend(fontsize=8)
    if new:
        fig.tight_layout()
    return fig


def norm_for(values: np.ndarray) -> colors.Normalize:
    """A colour normalisation that ignores NaN."""
    finite = np.asarray(values)[np.isfinite(values)]
    return colors.Normalize(vmin=float(finite.min()) if finite.size else 0.0,
                            vmax=float(finite.max()) if finite.size else 1.0)


__all__ = ["draw_heat", "draw_tile_1d", "label_colors", "norm_for", "plot_ccl_steps", "plot_ccl_times", "plot_heat",
           "plot_jacobi_bandwidth", "plot_jacobi_roofline", "plot_labels", "plot_photo_filters",
           "plot_propagation_frames", "plot_tile_2d"]
