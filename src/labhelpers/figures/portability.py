"""Chapter "Portability": figures and widget draw functions.

* :func:`draw_ndrange`: the widget's draw function: an NDRange of work-items cut into work-groups, the
  global size rounded up, the work-items past ``n`` greyed out by the guard, one work-item's three indices in
  OpenCL's and CUDA's names.
* :func:`plot_models`: the one chart of the chapter: SAXPY (GB/s) and the tiled matmul (GFLOP/s) in every
  model, on the CPU and on the GPU, each bar labelled by machine, with the ceilings of the same run.
* :func:`plot_data_clauses`: the time of the four OpenACC SAXPY versions when their data clauses' copies are
  made on a GPU.

Measured tables come from :mod:`labhelpers.experiments.portability` or the reference data ``ch12_*``.
"""

from __future__ import annotations

import textwrap

import numpy as np
import pandas as pd
from matplotlib import patches
from matplotlib.figure import Figure

from .. import validate
from ..experiments.portability import HOST_COPY_MODEL
from ..kernels import portability as pt
from ..plotting import figure_axes, figure_panels, readable_pt

#: One colour per model, the same in every figure.
MODEL_COLOURS = {
    "NumPy": "#9e9e9e", "Numba CPU": "#5b8fd6", "OpenCL C": "#e07a2d", "OpenACC C": "#6aa84f", "C -O3": "#b5b5b5",
    "Numba": "#5b8fd6", "CUDA C": "#76b900", "cuBLAS": "#404040", "copy (CuPy, D2D)": "#404040",
}
GROUP_COLOURS = ("#5b8fd6", "#f4a259", "#8cc084", "#c98bb9", "#e5c07b", "#7fb8c9")


def draw_ndrange(ax, n: int = 100, local_size: int = 32, item: int = 70) -> None:
    """The NDRange of a 1D launch over ``n`` elements: whole work-groups of ``local_size``, guard past ``n``.

    Each square is a work-item, coloured by work-group; grey squares are past the end (the guard
    ``if (i < n)`` keeps them idle). Work-item ``item`` is outlined and its indices are written out.
    """
    n = validate.integer(n, "n", minimum=1)
    local_size = validate.integer(local_size, "local_size", minimum=1)
    total = pt.global_size(n, local_size)
    groups = total // local_size
    item = min(validate.integer(item, "item", minimum=0), total - 1)
    per_row = min(max(local_size, 8), 32)
    rows = -(-total // per_row)  # not launch geometry: rows of the drawing
    for i in range(total):
        r, c = divmod(i, per_row)
        colour = GROUP_COLOURS[(i // local_size) % len(GROUP_COLOURS)] if i < n else "#dddddd"
        ax.add_patch(patches.Rectangle((c, -r), 0.9, 0.9, color=colour, lw=0))
    r, c = divmod(item, per_row)
    ax.add_patch(patches.Rectangle((c - 0.08, -r - 0.08), 1.06, 1.06, fill=False, lw=2, color="black"))
    ax.set_xlim(-0.5, per_row + 0.5)
    ax.set_ylim(-rows - 0.2, 1.3)
    ax.set_aspect("equal")
    ax.axis("off")
    g, lid = divmod(item, local_size)
    guarded = "idle (guard: i >= n)" if item >= n else "works"
    ax.set_title(f"n = {n}, local size {local_size}: global size {total} = {groups} work-group(s) x {local_size} "
                 f"({total - n} idle)\nwork-item {item} ({guarded}): get_global_id(0) = {item} "
                 f"(CUDA: blockIdx.x * blockDim.x + threadIdx.x)\nget_group_id(0) = {g} (blockIdx.x), "
                 f"get_local_id(0) = {lid} (threadIdx.x), get_local_size(0) = {local_size} (blockDim.x)",
                 fontsize=8.5, loc="left")


def _ok(table: pd.DataFrame) -> pd.DataFrame:
    return table[table["status"] == "ok"] if "status" in table else table


def models_table(gpu: pd.DataFrame, cpu: pd.DataFrame) -> pd.DataFrame:
    """The chapter's one table: every model's SAXPY and matmul on both machines, with ratios to the yardsticks.

    ``vs yardstick`` is the rate over the copy's for SAXPY (on the GPU the device-to-device copy, on the CPU
    the host copy ceiling; CPU tables collected without it use NumPy's SAXPY), over cuBLAS's for the GPU
    matmul and over NumPy's (BLAS) for the CPU matmul; rows that did not run keep their ``status``.
    """
    rows = []
    for table in (cpu, gpu):
        for kernel, column in (("saxpy", "gbps"), ("matmul", "gflops")):
            part = table[table["kernel"] == kernel]
            if not len(part):
                continue
            machine = part["machine"].iloc[0]
            if machine.startswith("CPU"):
                base_name, base = _cpu_yardstick(table, kernel, column)
            elif kernel == "saxpy":
                base_name, base = "copy", _rate(table, "copy", "copy (CuPy, D2D)", column)
            else:
                base_name, base = "cuBLAS", _rate(table, kernel, "cuBLAS", column)
            for r in part.itertuples():
                value = getattr(r, column)
                rows.append({"machine": machine, "kernel": kernel, "model": r.model, "size": r.size,
                             "rate": value, "unit": "GB/s" if column == "gbps" else "GFLOP/s",
                             "yardstick": base_name, "vs yardstick": value / base if base == base and base else np.nan,
                             "status": "ok" if r.status == "ok" else r.status.splitlines()[0]})
    return pd.DataFrame(rows)


def _cpu_yardstick(table: pd.DataFrame, kernel: str, column: str) -> tuple[str, float]:
    """The CPU's yardstick for ``kernel``: the host copy ceiling for SAXPY where the table has it, else NumPy."""
    if kernel == "saxpy":
        copy = _rate(table, "copy", HOST_COPY_MODEL, "gbps")
        if copy == copy:
            return "host copy", copy
    return "NumPy", _rate(table, kernel, "NumPy", column)


def _rate(table: pd.DataFrame, kernel: str, model: str, column: str) -> float:
    part = table[(table["kernel"] == kernel) & (table["model"] == model) & (table["status"] == "ok")]
    return float(part[column].iloc[0]) if len(part) else float("nan")


def plot_models(gpu: pd.DataFrame, cpu: pd.DataFrame, *, gpu_label: str = "", cpu_label: str = "",
                axes=None) -> Figure:
    """SAXPY (GB/s, left) and the tiled matmul (GFLOP/s, right) of every model on the CPU and the GPU.

    Bars are grouped by machine (the ``machine`` column of each table, e.g. ``CPU: ...`` and ``GPU: ...``);
    the dashed lines are the same run's yardsticks: on the GPU the copy (SAXPY) and cuBLAS (matmul), on the
    CPU the host copy (SAXPY; NumPy in tables without it) and NumPy (matmul). Log scale: the rates span four
    orders of magnitude. Returns the Figure.
    """
    # one above the other: side by side, the page would shrink the figure and its labels below legibility
    fig, axes = figure_panels(axes, (2, 1), (7, 8.2))
    small = readable_pt(fig)
    for ax, kernel, column, unit in ((axes[0], "saxpy", "gbps", "GB/s"), (axes[1], "matmul", "gflops", "GFLOP/s")):
        x0 = 0.0
        ticks, names = [], []
        for table, label in ((cpu, cpu_label), (gpu, gpu_label)):
            part = _ok(table)
            part = part[(part["kernel"] == kernel) & ~part["model"].isin(["cuBLAS", "copy (CuPy, D2D)"]
                                                                           if table is gpu else [])]
            if not len(part):
                continue
            xs = x0 + np.arange(len(part))
            ax.bar(xs, part[column], color=[MODEL_COLOURS.get(m, "#888888") for m in part["model"]], width=0.8)
            for xi, v in zip(xs, part[column]):
                ax.text(xi, v * 1.08, f"{v:,.0f}" if v >= 10 else f"{v:.1f}", ha="center", fontsize=max(7, small))
            ticks += list(xs)
            names += list(part["model"])
            machine = part["machine"].iloc[0]
            if table is gpu:
                ref_model, ref_kernel = ("copy (CuPy, D2D)", "copy") if kernel == "saxpy" else ("cuBLAS", kernel)
                ref = _rate(table, ref_kernel, ref_model, column)
                ref_name = "copy" if kernel == "saxpy" else "cuBLAS"
            elif kernel == "saxpy":
                ref_name, ref = _cpu_yardstick(table, kernel, column)
                ref = ref if ref_name == "host copy" else float("nan")
            else:
                ref, ref_name = float("nan"), ""
            if ref == ref:
                ax.hlines(ref, xs[0] - 0.5, xs[-1] + 0.5, colors="black", linestyles="--", lw=1)
                ax.text(xs[0] - 0.5, ref * 1.25, f"{ref_name}: {ref:,.0f}", ha="left", fontsize=max(7.5, small))
            ax.text((xs[0] + xs[-1]) / 2, -0.3, textwrap.fill(machine, 26), ha="center", va="top",
                    fontsize=max(7.5, small), transform=ax.get_xaxis_transform())
            x0 = xs[-1] + 2
        ax.set_yscale("log")
        ax.set_xticks(ticks)
        ax.set_xticklabels(names, rotation=30, ha="right", fontsize=max(8, small))
        ax.set_ylabel(unit)
        ax.set_title("SAXPY y = a*x + y" if kernel == "saxpy" else "tiled matmul (tile 16; CPU: NumPy is BLAS)",
                     fontsize=10)
        ax.grid(axis="y", alpha=0.3, which="both")
        top = ax.get_ylim()[1]
        ax.set_ylim(top=top * 3)
    labels = sorted({lab for lab in (cpu_label, gpu_label) if lab})
    if labels:
        fig.suptitle("; ".join(labels) + " (the GPU and the host CPU of one machine)" if len(labels) == 1
                     else "; ".join(labels), fontsize=max(8.5, small), y=0.995)
    fig.subplots_adjust(bottom=0.17, hspace=0.75, top=0.92)
    return fig


def plot_data_clauses(table: pd.DataFrame, *, label: str = "", ax=None) -> Figure:
    """Time of the lecture's four SAXPY versions on a GPU when their data clauses' copies are made (bars),
    with the megabytes each version moves between host and device. Returns the Figure."""
    fig, ax = figure_axes(ax, (7, 3.4))
    colours = ["#b5b5b5" if v == "naive" else "#76b900" for v in table["version"]]
    ax.bar(table["version"], table["median_ms"], color=colours)
    for i, r in enumerate(table.itertuples()):
        ax.text(i, r.median_ms * 1.02, f"{r.median_ms:.0f} ms\n{r.transfer_mb:,.0f} MB moved", ha="center",
                fontsize=8, va="bottom")
    ax.set_ylabel("ms for both SAXPYs")
    ax.set_ylim(0, table["median_ms"].max() * 1.3)
    ax.set_title(f"OpenACC data clauses, their copies made on the GPU\n{label}", fontsize=9)
    return fig


__all__ = ["MODEL_COLOURS", "draw_ndrange", "models_table", "plot_data_clauses", "plot_models"]
