"""Latency hiding by warp scheduling: a cycle-by-cycle model of one warp scheduler.

The model is the one of the classic G80 lecture example (seed note 004, "Hardware
multi-threading example"): every warp alternates between a *burst* of ``burst``
instructions that need the execution units (one instruction per cycle) and a memory
access that *stalls* it for ``stall`` cycles. One scheduler issues at most one
instruction per cycle, from a warp that is not stalled. With enough warps some warp is
always ready and no cycle is wasted: the latency is hidden.

:func:`simulate` runs the model and returns a :class:`Timeline` (who issued in every
cycle, and every warp's state); :func:`steady_state_utilisation` and
:func:`warps_to_hide` give the closed forms the simulation converges to, and
:func:`littles_law` is the general statement behind them:

    concurrency needed = latency x throughput.

With a stall of 50 cycles and bursts of 20, a stalled warp needs ``ceil(50 / 20) = 3``
*other* warps to cover its stall, so 4 warps keep the scheduler busy every cycle while
3 warps leave it idle 10 cycles in every 70 (utilisation 6/7).

Two scheduling policies are modelled:

* ``"greedy"`` (the lecture's diagram): keep issuing from the same warp until it
  stalls, then switch to the next ready warp in round-robin order.
* ``"round-robin"``: switch to the next ready warp every cycle. All warps then make
  progress at the same pace and reach their memory accesses at about the same time,
  so they also stall together: the reason real schedulers prefer a greedy order
  (Narasiman et al., *Improving GPU Performance via Large Warps and Two-Level Warp
  Scheduling*, MICRO 2011).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .. import validate

#: Warp states stored in :attr:`Timeline.state`.
READY = 0  # could issue, but the scheduler chose another warp
ISSUE = 1  # issued an instruction this cycle
STALL = 2  # waiting for memory
POLICIES = ("greedy", "round-robin")


@dataclass(frozen=True)
class Timeline:
    """The result of :func:`simulate`.

    Attributes:
        n_warps, burst, stall, policy: the model's parameters.
        issuing: for every cycle, the index of the warp that issued, or -1 for an idle cycle.
        state: ``(n_warps, cycles)`` array of :data:`READY`, :data:`ISSUE` or :data:`STALL`.
    """

    n_warps: int
    burst: int
    stall: int
    policy: str
    issuing: np.ndarray
    state: np.ndarray

    @property
    def cycles(self) -> int:
        """Number of simulated cycles."""
        return int(self.issuing.size)

    @property
    def busy_cycles(self) -> int:
        """Cycles in which an instruction was issued."""
        return int(np.count_nonzero(self.issuing >= 0))

    @property
    def idle_cycles(self) -> int:
        """Cycles in which every warp was stalled and nothing was issued."""
        return self.cycles - self.busy_cycles

    @property
    def utilisation(self) -> float:
        """Fraction of cycles with an instruction issued (1.0: the latency is completely hidden)."""
        return self.busy_cycles / self.cycles

    def __str__(self) -> str:
        return (f"{self.n_warps} warp(s), bursts of {self.burst} cycles, stalls of {self.stall} cycles "
                f"({self.policy}): {self.busy_cycles} of {self.cycles} cycles issue, "
                f"utilisation {self.utilisation:.3f}")

    def _repr_pretty_(self, p, cycle) -> None:  # IPython display
        p.text(str(self))


def simulate(n_warps: int, burst: int, stall: int, cycles: int | None = None, policy: str = "greedy") -> Timeline:
    """Simulate one warp scheduler cycle by cycle.

    Every warp starts ready. A warp issues ``burst`` instructions (one per cycle, when
    the scheduler picks it); the cycle after its last one it stalls for ``stall`` cycles,
    then it is ready for its next burst. The scheduler issues from at most one warp per
    cycle, chosen by ``policy`` (see the module docstring).

    Args:
        n_warps: warps resident on the scheduler (at least 1).
        burst: instructions between two memory accesses (cycles of work, at least 1).
        stall: cycles a memory access keeps the warp waiting (0 or more).
        cycles: length of the simulation; default ``6 * (burst + stall)``.
        policy: ``"greedy"`` or ``"round-robin"``.

    Returns:
        A :class:`Timeline`.

    Example:
        >>> simulate(4, burst=20, stall=50, cycles=700).utilisation
        1.0
    """
    n_warps = validate.integer(n_warps, "n_warps", minimum=1, allow_float=False)
    burst = validate.integer(burst, "burst", minimum=1, allow_float=False)
    stall = validate.integer(stall, "stall", minimum=0, allow_float=False)
    cycles = (6 * (burst + stall) if cycles is None
              else validate.integer(cycles, "cycles", minimum=1, allow_float=False))
    if policy not in POLICIES:
        raise ValueError(f"policy must be one of {POLICIES}, got {policy!r}")

    left = np.full(n_warps, burst)  # instructions left in the current burst
    ready_at = np.zeros(n_warps, dtype=np.int64)  # first cycle the warp may issue again
    issuing = np.full(cycles, -1, dtype=np.int64)
    state = np.full((n_warps, cycles), READY, dtype=np.int8)
    last = -1  # no warp has issued yet: warp 0 is the first one tried
    for t in range(cycles):
        ready = ready_at <= t
        state[~ready, t] = STALL
        if not ready.any():
            continue
        if policy == "greedy" and last >= 0 and ready[last]:
            w = last
        else:  # the next ready warp after the last one, in round-robin order
            order = (last + 1 + np.arange(n_warps)) % n_warps
            w = int(order[np.argmax(ready[order])])
        issuing[t] = w
        state[w, t] = ISSUE
        left[w] -= 1
        if left[w] == 0:  # the burst ends with a memory access: stall
            left[w] = burst
            ready_at[w] = t + 1 + stall
        last = w
    return Timeline(n_warps=n_warps, burst=burst, stall=stall, policy=policy, issuing=issuing, state=state)


def steady_state_utilisation(n_warps: int, burst: int, stall: int) -> float:
    """Long-run utilisation of the greedy scheduler: ``min(1, n_warps * burst / (burst + stall))``.

    Each warp needs ``burst + stall`` cycles per round and keeps the scheduler busy for
    ``burst`` of them; ``n_warps`` warps offer ``n_warps * burst`` cycles of work per round.
    """
    n_warps = validate.integer(n_warps, "n_warps", minimum=1, allow_float=False)
    burst = validate.integer(burst, "burst", minimum=1, allow_float=False)
    stall = validate.integer(stall, "stall", minimum=0, allow_float=False)
    return min(1.0, n_warps * burst / (burst + stall))


def warps_to_hide(burst: int, stall: int) -> int:
    """Fewest warps that keep the scheduler busy every cycle: ``ceil((burst + stall) / burst)``.

    That is one warp working plus ``ceil(stall / burst)`` warps to cover its stall; it is
    Little's law (:func:`littles_law`) with a latency of ``burst + stall`` cycles per round
    and a throughput of ``1 / burst`` rounds per cycle, rounded up to whole warps.
    """
    burst = validate.integer(burst, "burst", minimum=1, allow_float=False)
    stall = validate.integer(stall, "stall", minimum=0, allow_float=False)
    return -(-(burst + stall) // burst)


def littles_law(latency: float, throughput: float) -> float:
    """Little's law: the work that must be in flight to sustain ``throughput`` at ``latency``.

    ``latency`` and ``throughput`` must use the same time unit (e.g. cycles and
    instructions per cycle, or seconds and bytes per second); the result is in the
    throughput's unit of work (instructions, bytes...).
    """
    if not (latency >= 0 and throughput >= 0) or math.isinf(latency) or math.isinf(throughput):
        raise ValueError(f"latency and throughput must be finite and >= 0, got {latency!r} and {throughput!r}")
    return latency * throughput


def bytes_in_flight(bandwidth_gbs: float, latency_ns: float) -> float:
    """Bytes that must be requested and not yet delivered to sustain ``bandwidth_gbs`` (GB/s).

    Little's law with GB/s (= bytes per ns) times ns: e.g. 3,000 GB/s at 500 ns needs
    1.5 MB on its way at every moment.
    """
    return littles_law(latency_ns, bandwidth_gbs)


# --------------------------------------------------------------------------- drawing
_COLOURS = {ISSUE: "tab:green", STALL: "tab:red", READY: "0.85"}
_NAMES = {ISSUE: "issuing", STALL: "stalled on memory", READY: "ready, waiting for the scheduler"}


def _runs(row: np.ndarray, value: int) -> list[tuple[int, int]]:
    """(start, length) of every run of ``value`` in ``row``."""
    mask = np.concatenate([[False], row == value, [False]])
    edges = np.flatnonzero(mask[1:] != mask[:-1])
    return [(int(s), int(e - s)) for s, e in zip(edges[::2], edges[1::2])]


def draw_timeline(ax, timeline: Timeline) -> None:
    """Draw one row per warp (issuing / stalled / waiting) and a row of the scheduler's idle cycles."""
    n = timeline.n_warps
    labelled = set()
    for w in range(n):
        for value, colour in _COLOURS.items():
            runs = _runs(timeline.state[w], value)
            if runs:
                ax.broken_barh(runs, (n - w - 0.4, 0.8), facecolors=colour,
                               label=None if value in labelled else _NAMES[value])
                labelled.add(value)
    idle = _runs(timeline.issuing, -1)
    if idle:
        ax.broken_barh(idle, (-1.4, 0.8), facecolors="black", label="scheduler idle")
    ax.set_yticks([n - w for w in range(n)] + [-1])
    ax.set_yticklabels([f"warp {w}" for w in range(n)] + ["idle"])
    ax.set_xlim(0, timeline.cycles)
    ax.set_ylim(-2, n + 1.5)  # room above the warps for the legend
    ax.set_xlabel("cycle")
    ax.set_title(f"{n} warp(s), burst {timeline.burst}, stall {timeline.stall} ({timeline.policy}): "
                 f"utilisation {timeline.utilisation:.0%}", fontsize=10)
    handles, labels = ax.get_legend_handles_labels()
    by_label = dict(zip(labels, handles))
    ax.legend(by_label.values(), by_label.keys(), fontsize=7, loc="upper center", ncol=4, frameon=False)
