"""Chapter "n-body": its figures.

Static figures: ``plot_x(table..., *, ax=None, label=...) -> Figure`` (a new figure of the size the chapter shows
when ``ax`` is None); widget drawers: ``draw_x(ax, **params) -> None``, as :func:`labhelpers.interactive_figure`
calls them. The tables come from :mod:`labhelpers.experiments.nbody` (measured on a GPU) or from the reference data
``ch08_*``; the galaxy pictures from a :class:`~labhelpers.kernels.nbody.Trajectory`.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from ..launch import tiles_for
from ..models import nbody as model
from ..plotting import figure_axes, figure_panels, readable_pt
from ..roofline.draw import draw_roofline, table_ceilings

FLOPS = model.FLOPS_PER_INTERACTION


def _wrap_at_commas(text: str, width: int) -> str:
    """``text`` broken into lines of at most ``width`` characters after its commas (a longer part stays whole)."""
    lines: list[str] = []
    for part in text.split(", "):
        if lines and len(lines[-1]) + 2 + len(part) <= width:
            lines[-1] += ", " + part
        else:
            if lines:
                lines[-1] += ","
            lines.append(part)
    return "\n".join(lines)


def _numeric(series) -> np.ndarray:
    return pd.to_numeric(series, errors="coerce").to_numpy(dtype=float)


def plot_throughput(table: pd.DataFrame, *, ax=None, label: str, fma_peak_gflops: float | None = None,
                    kernels: list[str] | None = None) -> Figure:
    """G interactions/s against n (log-log), one line per kernel, with the FMA peak in interactions/s."""
    fig, ax = figure_axes(ax, (9, 5))
    small = readable_pt(fig)  # no smaller: the page shrinks a wide figure and its text
    kernels = kernels or list(dict.fromkeys(table["kernel"]))
    for k, name in enumerate(kernels):
        rows = table[table["kernel"] == name].sort_values("n")
        style = "-" if "tiled" in name or "best" in name or "stream-K" in name else "--"
        ax.plot(_numeric(rows["n"]), _numeric(rows["ginteractions"]), style, marker="o", ms=3, label=name,
                color=plt.cm.tab20(k % 20))
    if fma_peak_gflops:
        ax.axhline(fma_peak_gflops / FLOPS, color="k", lw=1, ls=":",
                   label=f"FP32 FMA peak / {FLOPS} flops = {fma_peak_gflops / FLOPS:,.0f} G/s")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("n (bodies)")
    ax.set_ylabel("G interactions/s")
    ax.set_title(f"All-pairs forces, float32 ({label})", fontsize=max(9, small))
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=max(7, small), ncol=2)
    return fig


def plot_lecture_comparison(here: pd.DataFrame, lecture: pd.DataFrame, *, ax=None, here_label: str,
                            lecture_label: str) -> Figure:
    """The lecture's published rates beside this chapter's, horizontal bars on a log axis.

    ``here`` has columns ``kernel`` and ``ginteractions`` (one row per kernel, at one n); ``lecture`` is the
    reference table ``ch08_lecture_table``. A new figure (``ax`` None) has its layout tightened.
    """
    new = ax is None
    fig, ax = figure_axes(ax, (9, 5.5))
    small = readable_pt(fig)  # no smaller: the page shrinks a wide figure and its text
    lec_names = [f"{r.kernel}" + (f", unroll {int(r.unroll)}" if pd.notna(r.unroll) else "")
                 for r in lecture.itertuples()]
    names = [f"lecture: {n}" for n in lec_names] + [f"here: {n}" for n in here["kernel"]]
    values = np.concatenate([_numeric(lecture["ginteractions"]), _numeric(here["ginteractions"])])
    colors = ["C7"] * len(lecture) + ["C0"] * len(here)
    y = np.arange(len(names))
    ax.barh(y, values, color=colors)
    ax.set_yticks(y, names, fontsize=max(7, small))
    ax.invert_yaxis()
    ax.set_xscale("log")
    for yy, v in zip(y, values):
        if np.isfinite(v):
            ax.text(v * 1.1, yy, f"{v:,.3g}", va="center", fontsize=max(6, small))
    ax.set_xlabel("G interactions/s (log scale)")
    ax.set_title(f"grey: {lecture_label}\nblue: {here_label}", fontsize=max(8, small))
    ax.grid(True, axis="x", which="both", alpha=0.3)
    if new:
        fig.tight_layout()
    return fig


def plot_math_traps(traps: pd.DataFrame, *, ax=None, label: str) -> Figure:
    """Time of one force evaluation for each way of writing ``1 / sqrt``, with the slowdown."""
    fig, ax = figure_axes(ax, (8, 3.2))
    small = readable_pt(fig)  # no smaller: the page shrinks a wide figure and its text
    names = {"rsqrt": "rsqrt(r2)\n(libdevice, fastmath)", "fast": "float32(1) / math.sqrt(r2)\nfastmath=True",
             "precise": "float32(1) / math.sqrt(r2)\nno fastmath", "float64": "1 / math.sqrt(r2)\n(float64!)"}
    modes = list(traps["math_mode"])
    ms = _numeric(traps["median_ms"])
    y = np.arange(len(modes))
    ax.barh(y, ms, color=["C2", "C1", "C3", "C3"][: len(modes)])
    ax.set_yticks(y, [names.get(m, m) for m in modes], fontsize=max(7, small))
    ax.invert_yaxis()
    for yy, v, s in zip(y, ms, _numeric(traps["slowdown"])):
        ax.text(v, yy, f"  {v:.2f} ms (x{s:.2f})", va="center", fontsize=max(7, small))
    ax.set_xlim(0, np.nanmax(ms) * 1.45)
    n = int(_numeric(traps["n"])[0])
    ax.set_xlabel(f"ms per force evaluation, n = {n:,} (tiled kernel)")
    ax.set_title(f"Four ways to write the inverse square root ({label})", fontsize=max(9, small))
    return fig


def plot_tuning(tuning: pd.DataFrame, *, ax=None, label: str, fma_peak_gflops: float | None = None) -> Figure:
    """Tile size x bodies per thread heatmap of G interactions/s (and % of the FMA peak)."""
    fig, ax = figure_axes(ax, (6.5, 4))
    small = readable_pt(fig)  # no smaller: the page shrinks a wide figure and its text
    grid = tuning.pivot_table(index="tile", columns="bodies", values="ginteractions")
    values = grid.to_numpy(dtype=float)
    ax.imshow(values, cmap="viridis", aspect="auto")
    ax.set_xticks(range(grid.shape[1]), [str(c) for c in grid.columns])
    ax.set_yticks(range(grid.shape[0]), [str(r) for r in grid.index])
    ax.set_xlabel("bodies per thread")
    ax.set_ylabel("tile (threads per block)")
    top = np.nanmax(values)
    for (r, c), v in np.ndenumerate(values):
        text = f"{v:,.0f}"
        if fma_peak_gflops:
            text += f"\n{v * FLOPS / fma_peak_gflops:.0%}"
        ax.text(c, r, text, ha="center", va="center", fontsize=max(7, small), color="black" if v > 0.75 * top else "white")
    n = int(_numeric(tuning["n"])[0])
    ax.set_title(f"G interactions/s (% of FMA peak), n = 2^{int(np.log2(n))} ({label})", fontsize=max(8, small))
    return fig


def plot_instruction_mix(mix: pd.DataFrame, *, ax=None, label: str) -> Figure:
    """SASS instructions per interaction in each kernel's hot loop, stacked by the unit that runs them.

    A new figure (``ax`` None) has its layout tightened.
    """
    new = ax is None
    fig, ax = figure_axes(ax, (9, 5.8))
    small = readable_pt(fig)  # no smaller: the page shrinks a wide figure and its text
    per = _numeric(mix["interactions_per_trip"])
    parts = {
        "FP32 (FADD, FMUL, FFMA)": _numeric(mix["sass_fp32"]) / per,
        "MUFU (rsqrt, rcp, sqrt)": _numeric(mix["sass_mufu"]) / per,
        "FP64": _numeric(mix["sass_fp64"]) / per,
        "loads (shared, global)": (_numeric(mix["sass_shared"]) + _numeric(mix["sass_global"])) / per,
    }
    total = _numeric(mix["sass_total"]) / per
    parts["integer, branches, other"] = total - sum(parts.values())
    y = np.arange(len(mix))
    left = np.zeros(len(mix))
    for k, (name, vals) in enumerate(parts.items()):
        vals = np.nan_to_num(vals)
        ax.barh(y, vals, left=left, label=name, color=f"C{[0, 3, 4, 2, 7][k]}")
        left += vals
    for yy, v in zip(y, total):
        ax.text(v, yy, f" {v:.1f}", va="center", fontsize=max(7, small))
    ax.axvline(13, color="k", ls=":", lw=1, label="13: the interaction itself")
    names = [_wrap_at_commas(name, 44) for name in mix["kernel"]]  # stream-K's label: two lines
    ax.set_yticks(y, names, fontsize=max(7, small))
    ax.invert_yaxis()
    ax.set_xlabel("SASS instructions per interaction (hot loop)")
    ax.set_title(f"What each kernel issues per interaction ({label})", fontsize=max(9, small))
    ax.set_xlim(0, np.nanmax(total) * 1.12)
    ax.legend(fontsize=max(7, small), loc="upper center", bbox_to_anchor=(0.5, -0.12), ncol=3)
    if new:
        fig.tight_layout()
    return fig


def plot_unit_limits(limits: pd.DataFrame, achieved_ginteractions: float, *, ax=None, label: str) -> Figure:
    """The bound from each unit (issue, FP32 pipe, MUFU) beside the measured rate, in G interactions/s."""
    fig, ax = figure_axes(ax, (8, 2.8))
    small = readable_pt(fig)  # no smaller: the page shrinks a wide figure and its text
    names = list(limits["unit"]) + ["measured"]
    values = list(_numeric(limits["ginteractions"])) + [achieved_ginteractions]
    colors = ["C3" if b else "C7" for b in limits["binds"]] + ["C0"]
    y = np.arange(len(names))
    ax.barh(y, values, color=colors)
    ax.set_yticks(y, names)
    ax.invert_yaxis()
    for yy, v in zip(y, values):
        ax.text(v, yy, f" {v:,.0f}", va="center", fontsize=max(8, small))
    ax.set_xlim(0, max(values) * 1.2)
    ax.set_xlabel("G interactions/s")
    ax.set_title(f"Upper bounds per unit (red: the one that binds) and the best kernel ({label})", fontsize=max(8, small))
    return fig


def plot_roofline(points: pd.DataFrame, *, ax=None, dram_gbs: float, fma_peak_gflops: float, label: str) -> Figure:
    """n-body kernels on the roofline: ``points`` has ``kernel``, ``intensity`` (flop/byte) and ``gflops``.

    Drawn by the one roofline plotter, :func:`labhelpers.roofline.draw_roofline`, with the bandwidth and FMA peak
    recorded beside the table (``label`` says where all of them come from).
    """
    fig, ax = figure_axes(ax, (8, 4.5))
    small = readable_pt(fig)  # no smaller: the page shrinks a wide figure and its text
    gflops = _numeric(points["gflops"])
    shown = pd.DataFrame({"name": [f"{k}: {g / 1e3:.1f} TFLOP/s" for k, g in zip(points["kernel"], gflops)],
                          "intensity": _numeric(points["intensity"]), "gflops": gflops})
    roofs = table_ceilings(label, dram_gbs=dram_gbs, fp32_gflops=fma_peak_gflops)
    draw_roofline(ax, roofs, shown, memory=("dram_gbs",), compute=("fp32_gflops",), points_label=label,
                     xlim=(0.1, 1e4), legend="below")
    ax.set_xlabel("arithmetic intensity (flop per byte of device memory, 20 flops per interaction)")
    ax.set_title(f"n-body on the roofline ({label})", fontsize=max(9, small))
    return fig


def draw_galaxy(ax, traj, frame: int = 0, *, limit: float | None = None, size: float = 1.0) -> None:
    """Frame ``frame`` of a galaxy collision, projected on x-y; the two galaxies' bodies in two colours."""
    small = readable_pt(ax.figure)  # no smaller: the page shrinks a wide figure and its text
    frame = int(np.clip(frame, 0, len(traj.times) - 1))
    p = traj.positions[frame]
    n = p.shape[0]
    half = n // 2
    if limit is None:
        limit = float(np.percentile(np.abs(traj.positions[0][:, :2]), 99)) * 1.3
    ax.scatter(p[:half, 0], p[:half, 1], s=size, c="C0", alpha=0.6, linewidths=0)
    ax.scatter(p[half:, 0], p[half:, 1], s=size, c="C1", alpha=0.6, linewidths=0)
    ax.set_xlim(-limit, limit)
    ax.set_ylim(-limit, limit)
    ax.set_aspect("equal")
    ax.set_xticks([])
    ax.set_yticks([])
    ax.set_facecolor("#0b0b1a")
    ax.set_title(f"t = {traj.times[frame]:.2f}  ({n:,} bodies)", fontsize=max(9, small))


def plot_galaxy_frames(traj, frames=(0, 10, 20, 30), *, size: float = 1.0, axes=None) -> Figure:
    """Frames ``frames`` of a galaxy collision, two a row (:func:`draw_galaxy` each), on ``axes`` (rows x 2) or in a
    new figure."""
    cols = min(len(frames), 2)  # two a row: four side by side would be shrunk past legibility by the page
    rows = (len(frames) + cols - 1) // cols
    fig, axes = figure_panels(axes, (rows, cols), (7, 3.5 * rows), squeeze=False)
    for ax in axes.flat[len(frames):]:
        fig.delaxes(ax)  # an odd count leaves one place empty
    for ax, frame in zip(axes.flat, frames):
        draw_galaxy(ax, traj, frame, size=size)
    fig.tight_layout()
    return fig


def plot_energy_error(trajectories: dict, *, ax=None) -> Figure:
    """Relative energy error ``|E(t) - E(0)| / |E(0)|`` against time, one line per labelled trajectory."""
    fig, ax = figure_axes(ax, (7, 3.6))
    for k, (name, traj) in enumerate(trajectories.items()):
        err = np.maximum(traj.relative_energy_error[1:], 1e-16)  # t = 0 has no error by definition
        ax.plot(traj.times[1:], err, color=f"C{k}", label=name)
    ax.set_yscale("log")
    ax.set_xlabel("time")
    ax.set_ylabel("|E(t) - E(0)| / |E(0)|")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    ax.set_title("Leapfrog (kick-drift-kick): energy error for two time steps", fontsize=9)
    return fig


def draw_tiles(ax, n: int, tile: int, block: int = 0) -> None:
    """The n x n interactions of one force evaluation, as the tiled kernel walks them.

    Rows are the bodies that feel the force (one thread each), columns the bodies that exert it. Block
    ``block`` owns ``tile`` rows and walks the columns one tile at a time; the hatched part of the last tile
    lies past the end of the array: those threads load zero-mass bodies instead.
    """
    tiles = tiles_for(n, tile)
    size = tiles * tile
    ax.add_patch(Rectangle((0, 0), n, n, facecolor="0.92", edgecolor="k"))
    r0 = block * tile
    for t in range(tiles):
        c0 = t * tile
        ax.add_patch(Rectangle((c0, r0), min(tile, n - c0), min(tile, n - r0), facecolor=f"C{t % 10}", alpha=0.6,
                               edgecolor="k", lw=0.5))
        if c0 + tile > n:
            ax.add_patch(Rectangle((n, r0), c0 + tile - n, tile, facecolor="none", edgecolor="C3", hatch="///",
                                   lw=1))
    if r0 + tile > n:
        ax.add_patch(Rectangle((0, n), size, r0 + tile - n, facecolor="none", edgecolor="0.5", hatch="\\\\",
                               lw=0.5))
    ax.set_xlim(0, size * 1.02)
    ax.set_ylim(size * 1.02, 0)
    ax.set_aspect("equal")
    ax.set_xlabel("body j (exerts the force): one tile of columns per trip")
    ax.set_ylabel("body i (one thread each)")
    pad = size - n
    ax.set_title(f"n = {n}, tile = {tile}: {tiles} tile(s) per block, {pad} zero-mass padding bod"
                 f"{'y' if pad == 1 else 'ies'} in the last", fontsize=9)


__all__ = ["draw_galaxy", "draw_tiles", "plot_energy_error", "plot_galaxy_frames", "plot_instruction_mix",
           "plot_lecture_comparison", "plot_math_traps", "plot_roofline", "plot_throughput", "plot_tuning",
           "plot_unit_limits"]
