"""Chapter "Memory consistency and coherence": its figures and the interleaving explorer's draw function.

Every ``plot_x(table, *, label=..., ax=None) -> Figure`` draws on the axes it is given (or a new figure) and returns
the Figure; :func:`draw_interleaving` draws the widget's picture on the axes it is given. Tables
of measured numbers come from :func:`labhelpers.live_or_reference`; ``label`` is its
:attr:`~labhelpers.measured.Measured.label`, so each figure names where its numbers come from.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from ..models import consistency as model
from ..plotting import figure_axes, readable_pt


def plot_counter_runs(table: pd.DataFrame, *, label: str, ax=None) -> Figure:
    """The counts the racy counter returned over many runs, next to the correct counters' (one bar each)."""
    fig, ax = figure_axes(ax, (8, 3.2))
    n = int(table["n"].iloc[0])
    racy = table[table["variant"] == "racy"]["count"].to_numpy(dtype=float)
    others = table[table["variant"] != "racy"].groupby("variant")["count"].min()
    if racy.size:
        ax.plot(np.arange(1, racy.size + 1), racy, "o", ms=4, color="C3", label="racy: counter[0] += 1")
    for k, (variant, count) in enumerate(others.items()):
        ax.axhline(count, color=f"C{k}", lw=1.5, ls="--", label=f"{variant.replace('_', '-')}: {count:,.0f}")
    ax.axhline(n, color="0.3", lw=0.8, ls=":")
    ax.set_yscale("log")
    ax.set_xlabel("run")
    ax.set_ylabel(f"count (correct: {n:,})")
    ax.set_title(f"{n:,} threads each add 1 to one counter ({label})", fontsize=9)
    ax.legend(fontsize=7, loc="center right")
    return fig


def plot_atomic_throughput(table: pd.DataFrame, *, label: str, ax=None) -> Figure:
    """Increments per second of every way to count (log scale), with the hardware atomics each one issues."""
    new = ax is None
    fig, ax = figure_axes(ax, (8, 3.4))
    small = readable_pt(fig)
    t = table.reset_index(drop=True)
    y = np.arange(len(t))
    values = t["increments_per_s"].to_numpy(dtype=float)
    colors = ["C3" if "one address" == k else ("C2" if "aggregated" in k else "C0") for k in t["kind"]]
    ax.barh(y, values, color=colors)
    ax.set_yticks(y, [f"{k}\n({a:,.0f} atomics)" for k, a in zip(t["kind"], t["atomics"])], fontsize=max(7, small))
    ax.invert_yaxis()
    ax.set_xscale("log")
    for yy, v in zip(y, values):
        if np.isfinite(v):
            ax.text(v * 1.1, yy, f"{v / 1e9:,.2f} G/s" if v >= 1e8 else f"{v / 1e6:,.1f} M/s", va="center",
                    fontsize=max(7, small))
    ax.set_xlabel("increments per second")
    ax.set_title(f"Counting with atomics ({label})", fontsize=max(9, small))
    ax.set_xlim(right=np.nanmax(values) * 8 if np.isfinite(values).any() else 1)
    if new:  # the long names inside the figure, which the page shrinks by its width
        fig.tight_layout()
    return fig


def plot_litmus(table: pd.DataFrame, *, label: str, tests=("MP", "SB", "LB", "CoRR", "MP-reversed"),
                access: str = "plain", ax=None) -> Figure:
    """Weak outcomes per million instances for each test, without a fence and with ``cuda.threadfence()``.

    Tests run between blocks. A bar of height zero is drawn as a marker at the bottom with
    the label "0 in N": not observed is not the same as impossible.
    """
    new = ax is None
    fig, ax = figure_axes(ax, (8, 3.4))
    small = readable_pt(fig)
    rows = table[(table["access"] == access) & (table["pairing"] == "different blocks")]
    x = np.arange(len(tests))
    width = 0.38
    floor = None
    for j, fence in enumerate(("none", "device")):
        for i, test in enumerate(tests):
            r = rows[(rows["test"] == test) & (rows["fence"] == fence)]
            if not len(r):
                continue
            r = r.iloc[0]
            per_million = 1e6 * r["weak"] / r["instances"]
            floor = 0.5e6 / r["instances"] if floor is None else min(floor, 0.5e6 / r["instances"])
            xx = i + (j - 0.5) * width
            color = "C3" if fence == "none" else "C0"
            if r["weak"] > 0:
                ax.bar(xx, per_million, width, color=color)
                ax.text(xx, per_million * 1.15, f"{int(r['weak']):,}", ha="center", fontsize=max(7, small))
            else:
                ax.plot(xx, 0.5e6 / r["instances"], "v", color=color)
                ax.text(xx, 0.5e6 / r["instances"] * 1.6, f"0 in\n{r['instances'] / 1e6:.0f}M", ha="center",
                        fontsize=max(6, small))
    ax.bar([], [], color="C3", label="no fence")
    ax.bar([], [], color="C0", label="cuda.threadfence() in both threads")
    ax.set_yscale("log")
    if floor is not None:
        ax.set_ylim(bottom=floor / 2)
    ax.set_xticks(x, [f"{t}\n(weak: {''.join(map(str, model.get_test(t).weak_outcome))})" for t in tests],
                  fontsize=max(8, small))
    ax.set_ylabel("target outcome per million instances")
    ax.set_title(f"Litmus tests between blocks, {access} accesses ({label})", fontsize=max(9, small))
    ax.legend(fontsize=max(7, small), loc="upper right")
    if new:  # nothing past the figure, which the page shrinks by its width
        fig.tight_layout()
    return fig


def plot_litmus_histogram(table: pd.DataFrame, *, label: str, test: str = "MP", ax=None) -> Figure:
    """All four outcomes of one test for every configuration measured, counts on a log scale.

    Outcomes sequential consistency forbids are hatched.
    """
    new = ax is None
    fig, ax = figure_axes(ax, (8, 3.4))
    small = readable_pt(fig)
    rows = table[table["test"] == test].reset_index(drop=True)
    outcomes = ["r00", "r01", "r10", "r11"]
    sc = model.sc_outcomes(model.get_test(test))
    width = 0.8 / max(len(rows), 1)
    for j, r in rows.iterrows():
        counts = np.array([r[o] for o in outcomes], dtype=float)
        xs = np.arange(4) + (j - (len(rows) - 1) / 2) * width
        name = f"fence {r['fence']}, {r['access']}, {r['pairing']}"
        bars = ax.bar(xs, np.where(counts > 0, counts, np.nan), width, label=name, color=f"C{j}")
        for o, b in zip(outcomes, bars):
            if (int(o[1]), int(o[2])) not in sc:
                b.set_hatch("///")
    ax.set_yscale("log")
    ax.set_xticks(range(4), [f"r0={o[1]}, r1={o[2]}" + ("" if (int(o[1]), int(o[2])) in sc else "\n(not SC)")
                             for o in outcomes], fontsize=8)
    ax.set_ylabel("instances")
    ax.set_title(f"{test}: every outcome ({label})", fontsize=9)
    ax.legend(fontsize=6, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return fig


def draw_interleaving(ax, test: str = "MP", interleaving: int = 0) -> None:
    """The widget's picture: interleaving number ``interleaving`` of ``test``, step by step, and its outcome.

    Each thread is a column; every operation sits on the row of the global step at which the
    interleaving runs it; the right column shows memory after each step.
    """
    t = model.get_test(test)
    orders = list(model.interleavings(t))
    k = int(interleaving) % len(orders)
    order = orders[k]
    memory = {loc: 0 for loc in t.locations}
    pcs = [0] * len(t.threads)
    regs = {}
    ax.set_xlim(-0.5, len(t.threads) + 0.6)
    ax.set_ylim(len(order) + 0.5, -0.9)
    ax.axis("off")
    for c in range(len(t.threads)):
        ax.text(c, -0.5, f"thread {c}", ha="center", fontsize=9, weight="bold")
    ax.text(len(t.threads) + 0.1, -0.5, "memory", ha="left", fontsize=9, weight="bold")
    for step, th in enumerate(order):
        op = t.threads[th][pcs[th]]
        pcs[th] += 1
        if op.kind == "st":
            memory[op.loc] = op.value
            text = str(op)
        elif op.kind == "ld":
            regs[op.reg] = memory[op.loc]
            text = f"{op}  -> {regs[op.reg]}"
        else:
            text = "fence"
        ax.text(th, step + 0.5, text, ha="center", va="center", fontsize=9,
                bbox=dict(boxstyle="round", fc=f"C{th}", alpha=0.25))
        ax.text(len(t.threads) + 0.1, step + 0.5, "  ".join(f"{l}={v}" for l, v in memory.items()), va="center",
                fontsize=8, family="monospace")
    outcome = tuple(regs[r] for r in t.registers)
    weak = outcome == t.weak_outcome
    ax.set_title(f"{test}: interleaving {k + 1} of {len(orders)} -> "
                 + ", ".join(f"{r}={v}" for r, v in zip(t.registers, outcome))
                 + ("   (the 'weak' outcome: sequentially consistent here)" if weak else ""), fontsize=9)


def plot_outcome_sets(test: str = "MP", *, ax=None) -> Figure:
    """For every possible outcome of ``test``: how many interleavings give it, and which machines allow it."""
    fig, ax = figure_axes(ax, (7, 3.2))
    table = model.outcome_table(model.get_test(test))
    regs = list(model.get_test(test).registers)
    labels = [", ".join(f"{r}={row[r]}" for r in regs) for _, row in table.iterrows()]
    y = np.arange(len(table))
    ax.barh(y, table["interleavings"], color=["C3" if w else "C0" for w in table["weak target"]])
    for yy, (_, row) in zip(y, table.iterrows()):
        allowed = [name for name in ("SC", "TSO", "PSO") if row[name]]
        ax.text(row["interleavings"] + 0.1, yy, "allowed by " + ", ".join(allowed) if allowed else "forbidden by all three",
                va="center", fontsize=7)
    ax.set_yticks(y, labels, fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel("interleavings giving this outcome (sequential consistency)")
    ax.set_xlim(right=max(table["interleavings"].max(), 1) * 1.9)
    ax.set_title(f"{test}: every outcome, and the models that allow it", fontsize=9)
    return fig


def plot_last_block(table: pd.DataFrame, *, label: str, ax=None) -> Figure:
    """GB/s of the last-block sum, cupy.sum and a copy, at each size measured."""
    fig, ax = figure_axes(ax, (7, 3.2))
    sizes = sorted(table["n"].unique())
    whats = list(dict.fromkeys(table["what"]))
    width = 0.8 / len(whats)
    for j, what in enumerate(whats):
        rows = table[table["what"] == what].set_index("n").reindex(sizes)
        xs = np.arange(len(sizes)) + (j - (len(whats) - 1) / 2) * width
        ax.bar(xs, rows["gbps"], width, label=what, color=f"C{j}")
        for xx, v in zip(xs, rows["gbps"]):
            if np.isfinite(v):
                ax.text(xx, v, f"{v:,.0f}", ha="center", va="bottom", fontsize=7)
    ax.set_xticks(range(len(sizes)), [f"2^{int(np.log2(n))} float32" for n in sizes])
    ax.set_ylabel("GB/s (bytes read / time)")
    ax.set_title(f"One launch, a fence and a ticket ({label})", fontsize=9)
    ax.legend(fontsize=7, loc="lower right")
    return fig


__all__ = ["draw_interleaving", "plot_atomic_throughput", "plot_counter_runs", "plot_last_block", "plot_litmus",
           "plot_litmus_histogram", "plot_outcome_sets"]
