"""Chapter "BSP and Amdahl": how one processor runs several threads, modelled cycle by cycle.

A processor issues up to ``width`` instructions per cycle (a *superscalar* core has several issue
slots). Each thread's instruction stream alternates a *burst* of ``burst`` instructions with a
*stall* of ``stall`` cycles (a cache miss: the next instruction needs the loaded value). Within a
burst a thread can issue at most ``ilp`` instructions in one cycle: its instruction-level
parallelism. Four ways to use the slots (Hennessy and Patterson, *Computer Architecture: A
Quantitative Approach*, chapter 3, "Multithreading"; Tullsen, Eggers and Levy, ISCA 1995):

* ``"single thread"``: one thread; while it stalls, every slot is empty.
* ``"coarse-grained"``: run one thread until it stalls, then switch to another ready thread, which
  costs ``switch`` empty cycles (the pipeline is refilled from the new thread).
* ``"fine-grained"``: every cycle the next ready thread in round-robin order issues, with no
  switching cost: no cycle is lost to a stall while some thread is ready. A GPU's warp scheduler
  works this way, with warps for threads.
* ``"simultaneous"`` (SMT, e.g. Intel's Hyper-Threading): in one cycle several threads issue,
  filling the slots one thread's ILP leaves empty.

Fine-grained multithreading fills the empty *cycles* (vertical waste); only simultaneous
multithreading also fills the empty *slots within a cycle* (horizontal waste).

:func:`simulate_multithreading` runs the model and returns an :class:`IssueTrace`;
:func:`compare_multithreading` tabulates the four; :func:`labhelpers.figures.bsp.draw_multithreading`
draws them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from .. import validate

#: The four ways of the model, in the order the chapter shows them.
MULTITHREADING_KINDS: tuple[str, ...] = ("single thread", "coarse-grained", "fine-grained", "simultaneous")


@dataclass(frozen=True)
class IssueTrace:
    """Who issued in which slot of which cycle.

    Attributes:
        kind: one of :data:`MULTITHREADING_KINDS`.
        slots: ``(cycles, width)`` array: the thread that issued in each slot, -1 for an empty slot.
        threads: how many threads there were.
    """

    kind: str
    slots: np.ndarray
    threads: int

    @property
    def cycles(self) -> int:
        return int(self.slots.shape[0])

    @property
    def width(self) -> int:
        return int(self.slots.shape[1])

    @property
    def instructions(self) -> int:
        """Instructions issued in all."""
        return int(np.count_nonzero(self.slots >= 0))

    @property
    def ipc(self) -> float:
        """Instructions per cycle."""
        return self.instructions / self.cycles

    @property
    def utilisation(self) -> float:
        """Share of the issue slots used: instructions / (cycles x width)."""
        return self.instructions / self.slots.size

    @property
    def idle_cycles(self) -> int:
        """Cycles in which no slot was used (vertical waste)."""
        return int(np.count_nonzero((self.slots < 0).all(axis=1)))


def simulate_multithreading(kind: str, threads: int = 6, *, width: int = 4, ilp: int = 2, burst: int = 8,
                            stall: int = 8, switch: int = 2, cycles: int = 36) -> IssueTrace:
    """Run the issue model of this module for ``cycles`` cycles.

    Args:
        kind: one of :data:`MULTITHREADING_KINDS` (``"single thread"`` ignores ``threads``).
        threads: threads the processor holds.
        width: issue slots per cycle.
        ilp: instructions one thread can issue in one cycle (its instruction-level parallelism).
        burst: instructions between two stalls.
        stall: cycles a thread waits after each burst.
        switch: empty cycles a coarse-grained switch to another thread costs.
        cycles: how long to run.

    Example:
        >>> simulate_multithreading("single thread", width=2, ilp=2, burst=4, stall=2, cycles=4).slots.tolist()
        [[0, 0], [0, 0], [-1, -1], [-1, -1]]
    """
    validate.choice(kind, "kind", MULTITHREADING_KINDS)
    threads = 1 if kind == "single thread" else validate.integer(threads, "threads", minimum=1, maximum=64)
    width = validate.integer(width, "width", minimum=1, maximum=16)
    ilp = validate.integer(ilp, "ilp", minimum=1, maximum=16)
    burst = validate.integer(burst, "burst", minimum=1)
    stall = validate.integer(stall, "stall", minimum=0)
    switch = validate.integer(switch, "switch", minimum=0)
    cycles = validate.integer(cycles, "cycles", minimum=1, maximum=100_000)

    left = [burst] * threads  # instructions left in each thread's current burst
    ready_at = [0] * threads  # the cycle from which each thread can issue again
    slots = np.full((cycles, width), -1, dtype=int)
    current, switching, rr = 0, 0, 0  # coarse-grained: running thread, switch cycles left; round-robin start

    def issue(t: int, c: int, free: int) -> int:
        """Thread t issues up to min(ilp, free, left) instructions in cycle c; returns how many."""
        n = min(ilp, free, left[t])
        left[t] -= n
        if left[t] == 0:  # end of the burst: wait for memory, then a new burst
            left[t] = burst
            ready_at[t] = c + 1 + stall
        return n

    for c in range(cycles):
        ready = [t for t in range(threads) if ready_at[t] <= c]
        if kind in ("single thread", "coarse-grained"):
            if switching:  # a cycle lost to a coarse-grained switch
                switching -= 1
                continue
            if current not in ready:
                others = [(current + k) % threads for k in range(1, threads)]
                others = [t for t in others if t in ready]
                if not others:
                    continue  # nobody can issue: an empty cycle
                current = others[0]  # (a single thread has no others)
                if switch:
                    switching = switch - 1  # this cycle is the first of the switch
                    continue
            n = issue(current, c, width)
            slots[c, :n] = current
        elif kind == "fine-grained":
            order = [(rr + k) % threads for k in range(threads)]
            chosen = next((t for t in order if t in ready), None)
            if chosen is None:
                continue
            n = issue(chosen, c, width)
            slots[c, :n] = chosen
            rr = (chosen + 1) % threads
        else:  # simultaneous: fill the slots from every ready thread, round-robin priority
            used = 0
            order = [(rr + k) % threads for k in range(threads)]
            for t in order:
                if used == width:
                    break
                if t in ready:
                    n = issue(t, c, width - used)
                    slots[c, used:used + n] = t
                    used += n
            rr = (rr + 1) % threads
    return IssueTrace(kind=kind, slots=slots, threads=threads)


def compare_multithreading(threads: int = 6, **params) -> pd.DataFrame:
    """One row per kind of :data:`MULTITHREADING_KINDS`: instructions, IPC, slots used, empty cycles.

    ``params`` are passed to :func:`simulate_multithreading` (``width``, ``ilp``, ``burst``, ...).
    """
    rows = []
    for kind in MULTITHREADING_KINDS:
        trace = simulate_multithreading(kind, threads, **params)
        rows.append({"kind": kind, "threads": trace.threads, "instructions": trace.instructions,
                     "instructions per cycle": round(trace.ipc, 2), "slots used": f"{trace.utilisation:.0%}",
                     "empty cycles": trace.idle_cycles})
    return pd.DataFrame(rows).set_index("kind")
