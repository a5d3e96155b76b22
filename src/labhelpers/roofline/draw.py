"""Drawing a roofline, in one place: :func:`draw_roofline` draws ceilings and measured points on the axes it is given
for chapters 5, 7, 8 and 9 (:func:`roofline_title` names the GPU once; :func:`table_ceilings` turns a chapter's
bandwidth and peak into ceilings to draw). Chapter 7's other figures and its widgets are in
:mod:`labhelpers.figures.roofline`.

:func:`draw_roofline` has the book's drawer signature, ``draw_x(ax, ...) -> None``; points with NaN (the
simulator's sweeps) are skipped.
"""

from __future__ import annotations

import math
import re
from typing import Sequence

import numpy as np
import pandas as pd

from ..plotting import readable_pt
from .ceilings import CEILING_NAMES, Ceilings

_MEMORY_STYLE = {"dram_gbs": {"color": "C0"}, "l2_gbs": {"color": "C2"}}
_COMPUTE_STYLE = {"fp32_gflops": {"color": "C3"}, "fp64_gflops": {"color": "C1"}}
#: Colours of the points (none of the roofs' colours), then the marker shapes used once they run out.
_POINT_COLORS = ("C4", "C5", "C6", "C9", "C8", "k", "C7", "#8c6d1f")
_POINT_SHAPES = {"fp32": ("o", "^", "v", "D"), "fp64": ("s", "P", "X", "h")}
#: Font sizes: legends and point labels, and titles.
FONT, TITLE_FONT = 8, 10


def finite_positive(v) -> bool:
    """Whether ``v`` is a number worth drawing on a log axis: finite and above zero (not None, not NaN)."""
    return v is not None and isinstance(v, (int, float)) and math.isfinite(v) and v > 0


def _fmt(v: float) -> str:
    return f"{v / 1e3:,.1f} T" if v >= 1e4 else f"{v:,.0f} "


_LABEL = re.compile(r"^(?P<kind>reference|this GPU|measured on this machine): (?P<gpu>.+?)"
                    r"(?: \((?P<date>\d{4}-\d{2}-\d{2})\))?$")


def roofline_title(ceilings: Ceilings, points_label: str | None) -> tuple[str, str]:
    """The figure's title and the legend name of its points: the GPU named once, each date said of what it dates.

    When the ceilings and the points come from the same GPU (e.g. two reference files measured on different
    days), the title names that GPU once and says which date belongs to the ceilings and which to the kernels.
    """
    found = _LABEL.match(points_label or "")
    date = ceilings.details.get("date")
    if found is None or found["gpu"] != ceilings.gpu:
        return f"Roofline, ceilings {ceilings.label}", points_label or "measured kernels"
    if ceilings.source == "reference" and found["kind"] == "reference":
        when = (f"measured {date}" if date == found["date"] or not found["date"] else
                f"ceilings measured {date}, kernels {found['date']}")
        return f"Roofline of the reference {ceilings.gpu} ({when})", "kernels"
    if ceilings.source == "measured" and found["kind"] != "reference":
        return f"Roofline of this GPU, {ceilings.gpu} (ceilings measured {date})", "kernels"
    return f"Roofline of {ceilings.gpu} (ceilings: {ceilings.label}; kernels: {points_label})", "kernels"


def table_ceilings(label: str, *, dram_gbs: float | None, fp32_gflops: float | None) -> Ceilings:
    """Ceilings recorded beside a chapter's table (a bandwidth and an FP32 peak), named after the table's label.

    ``label`` is a :class:`~labhelpers.measured.Measured` or reference label (``"reference: <GPU> (<date>)"`` or
    ``"this GPU: <GPU>"``); the ceilings say they come from the same place, so the plotter's title and legend do.
    """
    found = _LABEL.match(label or "")
    gpu = found["gpu"] if found else (label or "unknown GPU")
    source = "reference" if found and found["kind"] == "reference" else "measured"
    details = {"date": found["date"]} if found and found["date"] else {}
    return Ceilings(gpu=gpu, dram_gbs=dram_gbs, l2_gbs=None, fp32_gflops=fp32_gflops, fp64_gflops=None,
                    source=source, label=label, details=details)


def _point_style(i: int, precision: str) -> tuple[str, str]:
    shapes = _POINT_SHAPES["fp64" if precision == "fp64" else "fp32"]
    return _POINT_COLORS[i % len(_POINT_COLORS)], shapes[(i // len(_POINT_COLORS)) % len(shapes)]


def draw_roofline(ax, ceilings: Ceilings, points: pd.DataFrame | None = None, *,
                  memory: Sequence[str] = ("dram_gbs", "l2_gbs"),
                  compute: Sequence[str] = ("fp32_gflops", "fp64_gflops"),
                  datasheet: Ceilings | None = None, points_label: str | None = None, highlight: str | None = None,
                  point_labels: str | None = "legend", xlim: tuple[float, float] | None = None,
                  legend: str = "outside", roof_names: dict[str, str] | None = None) -> None:
    """Draw a roofline: bandwidth roofs (slanted), FMA roofs (flat), and measured points.

    Args:
        ax: matplotlib axes.
        ceilings: the roofs to draw (their ``label`` says where they come from).
        points: a table with ``name``, ``intensity`` (FLOP/byte) and ``gflops`` (and optionally ``precision``:
            ``"fp64"`` points are squares); rows with NaN are skipped.
        memory, compute: which ceilings to draw.
        datasheet: optional datasheet ceilings, drawn as thin dashed grey lines.
        points_label: where the points come from (a :class:`~labhelpers.measured.Measured` label).
        highlight: name of a point to draw larger.
        point_labels: ``"legend"`` (each point its own colour and legend entry: labels never overlap),
            ``"beside"`` (each name written next to its point) or None.
        xlim: intensity range; by default it covers the points and the ridge points.
        legend: ``"outside"`` (right of the axes), ``"below"`` (under the axes, in two columns) or a matplotlib
            location such as ``"lower right"``.
        roof_names: legend names of roofs that are not the standard ones, e.g. ``{"fp32_gflops": "cuBLAS FP32"}``
            when the flat roof is a library's best rather than the FMA peak.

    Returns:
        The axes.
    """
    if point_labels not in ("legend", "beside", None):
        raise ValueError(f"point_labels must be 'legend', 'beside' or None, got {point_labels!r}")
    names = roof_names or {}
    mems = [(k, ceilings.value(k)) for k in memory if finite_positive(ceilings.value(k))]
    comps = [(k, ceilings.value(k)) for k in compute if finite_positive(ceilings.value(k))]
    pts = None
    if points is not None and len(points):
        x = pd.to_numeric(points["intensity"], errors="coerce")
        y = pd.to_numeric(points["gflops"], errors="coerce")
        pts = points[np.isfinite(x) & np.isfinite(y) & (x > 0) & (y > 0)].reset_index(drop=True)
    if xlim is None:
        xs = [1 / 16, 1024.0]
        if pts is not None and len(pts):
            xs += [float(pts["intensity"].min()) / 2, float(pts["intensity"].max()) * 2]
        xlim = (min(xs), max(xs))
    lo, hi = xlim
    top = max([v for _, v in comps], default=None)
    grid = np.geomspace(lo, hi, 400)
    for key, bw in mems:
        y = bw * grid if top is None else np.minimum(bw * grid, top)
        ax.plot(grid, y, lw=2, label=f"{names.get(key, CEILING_NAMES[key][0])}: {bw:,.0f} GB/s", **_MEMORY_STYLE[key])
    fastest = max([v for _, v in mems], default=None)
    for key, peak in comps:
        start = peak / fastest if fastest else lo
        xs = np.geomspace(max(start, lo), hi, 50)
        ax.plot(xs, np.full_like(xs, peak), lw=2, label=f"{names.get(key, CEILING_NAMES[key][0])}: {_fmt(peak)}FLOP/s",
                **_COMPUTE_STYLE[key])
    if mems and comps:
        dram = ceilings.value("dram_gbs")
        fp32 = ceilings.value("fp32_gflops")
        if finite_positive(dram) and finite_positive(fp32) and "dram_gbs" in memory and "fp32_gflops" in compute:
            ridge = fp32 / dram
            ax.axvline(ridge, color="0.4", ls=":", lw=1, label=f"ridge: {ridge:.1f} FLOP/B")
    if datasheet is not None:
        sheet_top = max([v for v in (datasheet.value(k) for k in compute) if finite_positive(v)], default=None)
        for key in memory:
            bw = datasheet.value(key)
            if finite_positive(bw):
                ax.plot(grid, bw * grid if sheet_top is None else np.minimum(bw * grid, sheet_top), ls="--",
                        lw=0.8, color="0.5")
        for key in compute:
            peak = datasheet.value(key)
            if finite_positive(peak):
                ax.axhline(peak, ls="--", lw=0.8, color="0.5")
        ax.plot([], [], ls="--", lw=0.8, color="0.5", label=datasheet.label)
    title, points_name = roofline_title(ceilings, points_label)
    if pts is not None and len(pts):
        fp64 = "precision" in pts and (pts["precision"] == "fp64").any()
        if point_labels == "legend":  # a header line, then one entry per point
            ax.plot([], [], ls="none", label=points_name + (" (squares: FP64)" if fp64 else "") + ":")
        for i, row in pts.iterrows():
            big = highlight is not None and row["name"] == highlight
            color, marker = _point_style(i, row.get("precision", "fp32"))
            ax.plot(row["intensity"], row["gflops"], marker, color=color, ms=10 if big else 7, zorder=5,
                    markeredgecolor="k" if big else color,
                    label=f"  {row['name']}" if point_labels == "legend" else None)
        if point_labels != "legend":
            ax.plot([], [], "o", color="0.3", ms=6, label=points_name + (" (squares: FP64)" if fp64 else ""))
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlim(lo, hi)
    ymax = max([v for _, v in comps] + ([float(pts["gflops"].max())] if pts is not None and len(pts) else []),
               default=1e3)
    ax.set_ylim(bottom=max(1.0, (min(v for _, v in mems) if mems else 10) * lo / 2), top=ymax * 3)
    if point_labels == "beside" and pts is not None and len(pts):
        _label_points(ax, pts)
    ax.set_xlabel("arithmetic intensity (FLOP / byte)")
    ax.set_ylabel("GFLOP/s")
    ax.set_title(title, fontsize=max(TITLE_FONT, readable_pt(ax.figure)))
    ax.grid(True, which="major", alpha=0.3)
    font = max(FONT, readable_pt(ax.figure))  # FONT, or larger where the page shrinks a wide figure
    if ax.get_legend_handles_labels()[0]:
        if legend == "outside":
            ax.legend(fontsize=font, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
        elif legend == "below":
            ax.legend(fontsize=font, loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=2)
        else:
            ax.legend(fontsize=font, loc=legend)
    if not mems and not comps:
        ax.text(0.5, 0.5, "no ceilings to draw (not measured yet)", transform=ax.transAxes, ha="center")


#: Where a point's label may go, tried in order: right-above, right-below, left-above, left-below, then
#: further up and down (offsets in points, and the horizontal alignment).
_LABEL_SPOTS = ((6, 4, "left"), (6, -12, "left"), (-6, 4, "right"), (-6, -12, "right"), (6, 15, "left"),
                (6, -23, "left"), (-6, 15, "right"), (-6, -23, "right"))


def _label_points(ax, pts: pd.DataFrame) -> None:
    """Name each point, at the first spot where the label stays inside the axes and covers no other label, no
    point and no roof; if there is no such spot, at the first one that at least covers no other label or point."""
    renderer = ax.figure.canvas.get_renderer()
    inside = ax.get_window_extent(renderer)
    roofs = [line.get_path().transformed(line.get_transform()) for line in ax.lines
             if line.get_linestyle() not in ("None", "", " ") and len(line.get_xdata()) > 1]
    dots = [ax.transData.transform((float(r["intensity"]), float(r["gflops"]))) for _, r in pts.iterrows()]
    placed = []
    font = max(FONT, readable_pt(ax.figure))

    def covers_a_point(box) -> bool:
        return any(box.x0 - 4 <= x <= box.x1 + 4 and box.y0 - 4 <= y <= box.y1 + 4 for x, y in dots)

    for _, row in pts.iterrows():
        fallback = None
        chosen = None
        for dx, dy, ha in _LABEL_SPOTS:
            label = ax.annotate(str(row["name"]), (row["intensity"], row["gflops"]), textcoords="offset points",
                                xytext=(dx, dy), ha=ha, fontsize=font)
            box = label.get_window_extent(renderer)
            label.remove()
            free = not any(box.overlaps(other) for other in placed) and not covers_a_point(box)
            within = inside.x0 <= box.x0 and box.x1 <= inside.x1 and inside.y0 <= box.y0 and box.y1 <= inside.y1
            if free and within and not any(path.intersects_bbox(box, filled=False) for path in roofs):
                chosen = (dx, dy, ha)
                break
            if fallback is None and free and within:
                fallback = (dx, dy, ha)
        dx, dy, ha = chosen or fallback or _LABEL_SPOTS[0]
        label = ax.annotate(str(row["name"]), (row["intensity"], row["gflops"]), textcoords="offset points",
                            xytext=(dx, dy), ha=ha, fontsize=font)
        placed.append(label.get_window_extent(renderer))


