"""Chapter "Scan and the patterns built on it": the widget's drawing and the chapter's plots.

* :func:`draw_scan_step`: one step of Hillis-Steele or Blelloch on a small array (the widget);
* :func:`plot_bank_conflicts`: Blelloch's worst bank conflict per level, padded or not (a model);
* :func:`plot_methods`, :func:`plot_sizes`, :func:`plot_tiles`, :func:`plot_compaction`,
  :func:`plot_radix`, :func:`plot_spmv`: measured tables (live or reference), each labelled with the
  GPU they come from.

Every ``plot_x(measured, *, ax=None) -> Figure`` draws on the axes it is given (or a new figure) and returns the
Figure; :func:`draw_scan_step` draws on the axes it is given (``draw_x(ax, **params) -> None``).
"""

from __future__ import annotations

import math

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from ..models import scan as model
from ..plotting import figure_axes, readable_pt

#: Colours: combined (read), updated (written), untouched.
READ, WRITE, IDLE = "#4C72B0", "#DD8452", "#E5E5E5"


def draw_scan_step(ax, algorithm: str = "hillis_steele", step: int = 0, values=None,
                   seed_bounds: bool = False) -> None:
    """Draw step ``step`` of ``algorithm`` on ``values`` (default: 16 values 1, 2, ..., 16 shuffled).

    Top row: the array before the step, with an arrow from every element read to the element it
    is added into; bottom row: the array after. The title counts the additions so far (work) and
    the steps so far (depth). ``step`` beyond the last step shows the last one.
    """
    if values is None:
        values = [3, 1, 7, 0, 4, 1, 6, 3, 5, 2, 8, 1, 2, 6, 0, 4]
    steps = model.steps_of(algorithm, values, seed_bounds)
    asked = int(step)
    step = max(0, min(asked, len(steps) - 1))
    small = max(8, readable_pt(ax.figure))
    now = steps[step]
    before = steps[step - 1].values if step > 0 else now.values
    n = len(now.values)
    read = {a for a, _ in now.pairs}
    written = {b for _, b in now.pairs} | ({a for a, _ in now.pairs} if now.phase == "down" else set())
    if now.phase == "clear":
        written = {n - 1}
    for row, vals, y in (("before", before, 1.0), ("after", now.values, 0.0)):
        for i, v in enumerate(vals):
            if row == "before":
                color = READ if i in read else IDLE
            else:
                color = WRITE if i in written else IDLE
            ax.add_patch(plt.Rectangle((i - 0.45, y - 0.3), 0.9, 0.6, color=color, ec="0.4", lw=0.6))
            ax.text(i, y, str(v), ha="center", va="center", fontsize=small)
    for a, b in now.pairs:
        ax.annotate("", xy=(b, 0.32), xytext=(a, 0.68),
                    arrowprops=dict(arrowstyle="->", color=READ, lw=0.9, shrinkA=0, shrinkB=0))
        if now.phase == "down":  # the left child takes the right child's old value
            ax.annotate("", xy=(a, 0.32), xytext=(b, 0.68),
                        arrowprops=dict(arrowstyle="->", color="0.55", lw=0.7, ls="--", shrinkA=0, shrinkB=0))
    adds = sum(s.adds for s in steps[:step + 1])
    depth = sum(1 for s in steps[1:step + 1] if s.phase in ("step", "up", "down"))
    name = {"hillis_steele": "Hillis-Steele (inclusive)", "blelloch": "Blelloch (exclusive)"}[algorithm]
    title = (f"{name}, {'slide loop bounds, ' if seed_bounds else ''}{now.label}: "
             f"{now.active} threads add; {adds} additions and {depth} steps so far (of {len(steps) - 1})")
    if asked > step:  # the slider goes past this algorithm's last step: say so rather than repeat the picture
        title = f"step {asked}: {name.split(' (')[0]} is done after step {step}, shown here\n" + title
    ax.set_title(title, fontsize=max(9, small))
    ax.set_xlim(-0.7, n - 0.3)
    ax.set_ylim(-0.5, 1.5)
    ax.set_yticks([0, 1], ["after", "before"])
    ax.set_xticks(range(n))
    ax.tick_params(axis="x", labelsize=small)
    ax.set_xlabel("element (thread)")
    for side in ("top", "right", "left"):
        ax.spines[side].set_visible(False)


def plot_bank_conflicts(threads: int = 256, *, ax=None) -> Figure:
    """Blelloch's worst bank conflict at every level (up-sweep, then down-sweep), with and without padding."""
    fig, ax = figure_axes(ax, (8, 3.2))
    for padded, marker in ((False, "o"), (True, "s")):
        rows = model.blelloch_bank_conflicts(threads, padded)
        ax.plot(range(len(rows)), [r["worst_conflict"] for r in rows], marker=marker,
                label="padded (word i at i + i // 32)" if padded else "not padded")
    rows = model.blelloch_bank_conflicts(threads, False)
    ax.set_xticks(range(len(rows)), [f"{r['phase']}\n{r['stride']}" for r in rows], fontsize=7)
    ax.set_xlabel("phase and stride")
    ax.set_ylabel("worst conflict (passes per warp access)")
    ax.set_title(f"Blelloch's tree in one block of {threads} threads", fontsize=9)
    ax.legend(fontsize=8)
    return fig


def _label(ax, measured) -> None:
    ax.text(0.99, 0.01, measured.label, transform=ax.transAxes, ha="right", va="bottom",
            fontsize=max(7, readable_pt(ax.figure)), color="0.35")


def _not_measured(ax) -> bool:
    ax.text(0.5, 0.5, "not measured", transform=ax.transAxes, ha="center", va="center")
    return True


#: The methods of the scan tables that are yardsticks (drawn as lines), not kernels of the chapter.
YARDSTICKS = ("copy", "cub_scan", "cupy_cumsum")


def plot_methods(measured, *, ax=None) -> Figure:
    """Effective bandwidth of every scan method, with CUB's scan, ``cupy.cumsum`` and the copy as lines.

    Tables measured before CUB's scan was timed on its own (no ``cub_scan`` row) draw without its line.
    """
    new = ax is None
    fig, ax = figure_axes(ax, (8, 3.8))
    small = readable_pt(fig)
    t = measured.table
    mine = t[~t["method"].isin(YARDSTICKS)].reset_index(drop=True)
    values = pd.to_numeric(mine["gbps"], errors="coerce").to_numpy(dtype=float)
    colors = ["C2" if b == 8 else ("C0" if b == 12 else "C7") for b in mine["bytes_per_element"]]
    ax.barh(range(len(mine)), np.nan_to_num(values), color=colors)
    ax.set_yticks(range(len(mine)), [f"{a} ({int(b)} B/elem)" for a, b in zip(mine["title"], mine["bytes_per_element"])],
                  fontsize=max(8, small))
    ax.invert_yaxis()
    for method, name, color in (("copy", "copy (read + write)", "C3"), ("cub_scan", "CUB's scan", "C4"),
                                ("cupy_cumsum", "cupy.cumsum (copy + CUB scan)", "C1")):
        level = pd.to_numeric(t.loc[t["method"] == method, "gbps"], errors="coerce")
        if len(level) and np.isfinite(level.iloc[0]):
            ax.axvline(float(level.iloc[0]), color=color, ls="--", lw=1.2, label=name)
    for y, v in enumerate(values):
        if np.isfinite(v):
            ax.text(v, y, f" {v:,.0f}", va="center", fontsize=max(7, small))
    if not np.isfinite(values).any():
        _not_measured(ax)
    ax.set_xlabel("effective bandwidth, GB/s (8 bytes per element / time)")
    n = int(pd.to_numeric(t["n"]).max())
    ax.set_title(f"Scan methods on 2^{int(math.log2(n))} int32 (the chained scan on fewer)", fontsize=max(9, small))
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=max(8, small), loc="center right")  # clear of the source label, lower right
    _label(ax, measured)
    if new:  # the long names inside the figure, which the page shrinks by its width
        fig.tight_layout()
    return fig


def plot_sizes(measured, *, ax=None, dtype: str = "int32") -> Figure:
    """Effective bandwidth against the number of elements: single pass, three kernels, CUB's scan,
    ``cupy.cumsum``, copy (a method the table lacks, such as CUB's scan in older tables, is left out)."""
    fig, ax = figure_axes(ax, (7, 3.6))
    t = measured.table
    t = t[t["dtype"] == dtype]
    names = {"lookback_warp": "single pass, warp look-back", "lookback": "single pass, block look-back",
             "tiled_reduce_then_scan": "reduce-then-scan (3 kernels)",
             "cub_scan": "CUB's scan", "cupy_cumsum": "cupy.cumsum (copy + CUB scan)", "copy": "copy (read + write)"}
    any_value = False
    for method, name in names.items():
        rows = t[t["method"] == method].sort_values("n")
        if not len(rows):
            continue
        y = pd.to_numeric(rows["gbps"], errors="coerce")
        any_value |= bool(np.isfinite(y).any())
        ax.plot(rows["n"], y, marker="o", ms=3, label=name, ls="--" if method in YARDSTICKS else "-")
    ax.set_xscale("log", base=2)
    ax.set_xlabel(f"elements ({dtype})")
    ax.set_ylabel("GB/s (8 bytes per element / time)")
    ax.set_title("Scans need large arrays to reach the memory's speed", fontsize=9)
    if not any_value:
        _not_measured(ax)
    ax.legend(fontsize=8)
    _label(ax, measured)
    return fig


#: Bar colours of :func:`plot_tiles`: (look-back, 16-byte loads) -> colour.
TILE_COLORS = {("block", True): "C0", ("block", False): "#9DB4D6", ("warp", True): "C2", ("warp", False): "#98D1A4"}


def plot_tiles(measured, *, ax=None) -> Figure:
    """Both single passes for each tile shape (threads x items per thread; 16-byte loads or not).

    Bars are grouped by look-back (``block``: the whole block looks back; ``warp``: warp 0 alone, one 64-bit
    word per tile); tables from before the warp look-back (no ``lookback`` column) are all ``block``.
    """
    new = ax is None
    fig, ax = figure_axes(ax, (8, 3.4))
    t = measured.table.reset_index(drop=True)
    kinds = t["lookback"] if "lookback" in t else pd.Series(["block"] * len(t))
    vector = [bool(v) for v in t["vector"]]
    labels = [f"{k} {int(a)} x {int(b)}{'' if v else ', 4-byte'}" for k, a, b, v in
              zip(kinds, t["threads"], t["items"], vector)]
    values = pd.to_numeric(t["gbps"], errors="coerce").to_numpy(dtype=float)
    ax.bar(range(len(t)), np.nan_to_num(values), color=[TILE_COLORS[(k, v)] for k, v in zip(kinds, vector)])
    ax.set_xticks(range(len(t)), labels, rotation=30, fontsize=max(7, readable_pt(fig)), ha="right")
    ax.set_ylabel("GB/s (8 bytes per element / time)")
    ax.set_title("Single pass by look-back and tile (threads per block x items per thread)", fontsize=9)
    if not np.isfinite(values).any():
        _not_measured(ax)
    _label(ax, measured)
    if new:  # the slanted labels inside the figure
        fig.tight_layout()
    return fig


def plot_compaction(measured, *, ax=None) -> Figure:
    """Compaction against CuPy's boolean-mask indexing, for several kept fractions."""
    fig, ax = figure_axes(ax, (7, 3.4))
    t = measured.table
    fracs = sorted(t["keep_fraction"].unique())
    names = {"single_pass": "one pass", "three_kernels": "flags, scan, scatter", "cupy_mask": "cupy x[x > t]",
             "cupy_given_mask": "cupy x[mask] (mask given)"}
    width = 0.8 / len(names)
    for k, (method, name) in enumerate(names.items()):
        vals = [pd.to_numeric(t.loc[(t["method"] == method) & (t["keep_fraction"] == f), "gbps"],
                              errors="coerce").max() for f in fracs]
        ax.bar(np.arange(len(fracs)) + (k - 1.5) * width, np.nan_to_num(vals), width, label=name)
    ax.set_xticks(range(len(fracs)), [f"keep {f:.0%}" for f in fracs])
    ax.set_ylabel("GB/s (4 (n + kept) bytes / time)")
    ax.set_title("Stream compaction", fontsize=9)
    ax.legend(fontsize=7)
    _label(ax, measured)
    return fig


def plot_radix(measured, *, ax=None) -> Figure:
    """Keys per second of the radix sort against the digit width, with ``cupy.sort`` as a line."""
    fig, ax = figure_axes(ax, (7, 3.4))
    t = measured.table
    mine = t[t["method"] == "radix"].reset_index(drop=True)
    values = pd.to_numeric(mine["gkeys"], errors="coerce").to_numpy(dtype=float)
    labels = [f"{int(b)} bits ({int(p)} passes)\n{int(th)} x {int(it)}" for b, p, th, it in
              zip(mine["bits"], mine["passes"], mine["threads"], mine["items"])]
    ax.bar(range(len(mine)), np.nan_to_num(values), color="C0")
    ax.set_xticks(range(len(mine)), labels, fontsize=7)
    cub = pd.to_numeric(t.loc[t["method"] == "cupy_sort", "gkeys"], errors="coerce")
    if len(cub) and np.isfinite(cub.iloc[0]):
        ax.axhline(float(cub.iloc[0]), color="C1", ls="--", label="cupy.sort")
        ax.legend(fontsize=8)
    ax.set_ylabel("10^9 keys per second")
    ax.set_title(f"LSD radix sort of 2^{int(math.log2(int(t['n'].max())))} uint32 keys", fontsize=9)
    if not np.isfinite(values).any():
        _not_measured(ax)
    _label(ax, measured)
    return fig


def plot_spmv(measured, *, ax=None) -> Figure:
    """Effective bandwidth of every SpMV kernel and cuSPARSE, per matrix."""
    fig, ax = figure_axes(ax, (8, 3.6))
    t = measured.table
    matrices = list(dict.fromkeys(t["matrix"]))
    methods = list(dict.fromkeys(t["method"]))
    width = 0.8 / max(1, len(methods))
    for k, method in enumerate(methods):
        vals = [pd.to_numeric(t.loc[(t["method"] == method) & (t["matrix"] == m), "gbps"], errors="coerce").max()
                for m in matrices]
        ax.bar(np.arange(len(matrices)) + (k - (len(methods) - 1) / 2) * width, np.nan_to_num(vals), width,
               label=method.replace("_", " "), color="C1" if method == "cusparse" else None)
    ax.set_xticks(range(len(matrices)), [m.split(" (")[0] for m in matrices], fontsize=8)
    ax.set_ylabel("GB/s (bytes an SpMV must move / time)")
    ax.set_title("SpMV kernels on three kinds of matrix", fontsize=9)
    ax.legend(fontsize=7, ncol=2)
    _label(ax, measured)
    return fig
