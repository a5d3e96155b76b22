"""Chapter "Scheduling: warps, divergence, occupancy": latency hiding, a cycle-by-cycle model of one warp scheduler.

The model is the one of the classic G80 lecture example (*GPU Computing* course walkthrough,
2025, "Hardware multi-threading example"): every warp alternates between a *burst* of ``burst``
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

:func:`vector_add_walkthrough` is a second, finer model: the cs378 lecture's walk-through of a vector
add, warp by warp and instruction by instruction (Rossbach, *CUDA* lecture slides, UT Austin CS378,
"Example: VectorAdd on GPU"), with a *scoreboard* that holds back an instruction until the registers
it reads have arrived.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from .. import validate
from ..launch import warps_for

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
    return -(-(burst + stall) // burst)  # not launch geometry: Little's law, rounded up to whole warps


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


# --------------------------------------------------------------------------- the vector add, warp by warp


@dataclass(frozen=True)
class Instruction:
    """One instruction of :data:`VECTOR_ADD`: its text, the registers it writes and reads, and its kind."""

    text: str
    writes: tuple[str, ...]
    reads: tuple[str, ...]
    kind: str  # "alu", "branch", "load", "store" or "exit"


#: The vector add ``if (i < n) c[i] = a[i] + b[i]`` as the cs378 slides show its PTX, in the order the
#: lanes of a warp meet it: the compare, the branch, then the path of the lanes past the end (``bra L2``)
#: and the path of the lanes in range (two loads, the add, the store), and the exit where both meet.
VECTOR_ADD = {
    "start": (Instruction("setp.lt.s32 %p, %r5, %rd4", ("%p",), ("%r5", "%rd4"), "alu"),
              Instruction("@%p bra L1", (), ("%p",), "branch")),
    "out of range": (Instruction("bra L2", (), (), "branch"),),
    "in range": (Instruction("ld.global.f32 %f1, [%r6]", ("%f1",), (), "load"),
                 Instruction("ld.global.f32 %f2, [%r7]", ("%f2",), (), "load"),
                 Instruction("add.f32 %f3, %f1, %f2", ("%f3",), ("%f1", "%f2"), "alu"),
                 Instruction("st.global.f32 [%r8], %f3", (), ("%f3",), "store")),
    "end": (Instruction("ret", (), (), "exit"),),
}


@dataclass(frozen=True)
class Walkthrough:
    """The result of :func:`vector_add_walkthrough`.

    Attributes:
        n, threads, warp_size, memory_latency, alu_latency: the model's parameters.
        issued: one row per issued instruction: ``cycle``, ``warp``, ``lanes`` (the active ones, e.g. ``"0-3"``)
            and ``instruction``.
        trace: one row per cycle, one column per warp: the instruction the warp issued, ``waits for %f1 ...``
            when the scoreboard holds it back, ``ready`` when another warp was chosen, ``done`` after ``ret``.
    """

    n: int
    threads: int
    warp_size: int
    memory_latency: int
    alu_latency: int
    issued: pd.DataFrame
    trace: pd.DataFrame

    @property
    def cycles(self) -> int:
        """Cycles until the last warp's ``ret``."""
        return len(self.trace)

    @property
    def idle_cycles(self) -> int:
        """Cycles in which no warp could issue: every unfinished warp was waiting on the scoreboard."""
        return self.cycles - len(self.issued)

    def __str__(self) -> str:
        return (f"vector add of {self.n} elements, {self.threads} threads, warps of {self.warp_size}: "
                f"{len(self.issued)} instructions in {self.cycles} cycles, {self.idle_cycles} idle "
                f"(memory latency {self.memory_latency}, ALU latency {self.alu_latency})")

    def _repr_pretty_(self, p, cycle) -> None:  # IPython display
        p.text(str(self))


def _lanes(active: list[int]) -> str:
    return f"{active[0]}-{active[-1]}" if len(active) > 1 else str(active[0])


def warp_program(n: int, first_thread: int, lanes_used: int) -> list[tuple[Instruction, list[int]]]:
    """The instructions one warp issues for :data:`VECTOR_ADD`, each with the lanes active for it.

    The warp's threads are ``first_thread`` to ``first_thread + lanes_used - 1`` (the last warp of a block
    may have fewer threads than lanes). Lanes whose thread index is ``>= n`` take the out-of-range path;
    when a warp holds both kinds of lanes it runs both paths one after the other (divergence), the
    out-of-range one first in this model.
    """
    lanes = list(range(lanes_used))
    inside = [lane for lane in lanes if first_thread + lane < n]
    outside = [lane for lane in lanes if first_thread + lane >= n]
    program = [(ins, lanes) for ins in VECTOR_ADD["start"]]
    if outside:
        program += [(ins, outside) for ins in VECTOR_ADD["out of range"]]
    if inside:
        program += [(ins, inside) for ins in VECTOR_ADD["in range"]]
    program += [(ins, lanes) for ins in VECTOR_ADD["end"]]
    return program


def vector_add_walkthrough(n: int = 8, threads: int = 8, warp_size: int = 4, memory_latency: int = 20,
                           alu_latency: int = 1, max_cycles: int = 10_000) -> Walkthrough:
    """Play the cs378 vector-add walk-through: one scheduler, a scoreboard, warps issuing in round-robin order.

    The lecture's setting is the default: 8 elements, one block of 8 threads, warps of 4 threads on one
    SM with 4 cores, so each instruction of a warp takes one cycle to issue. Every cycle the scheduler
    tries the warps in round-robin order, starting after the one that issued last, and issues the next
    instruction of the first warp whose instruction may go: in order within a warp, and only when the
    **scoreboard** says that every register it reads has been written (a load's register arrives
    ``memory_latency`` cycles after it issued, an ALU result ``alu_latency`` cycles after) and that no
    earlier instruction still has a write pending to a register it writes. Stores and branches write no
    register, so nothing waits for them.

    Args:
        n: elements (threads with index ``>= n`` take the out-of-range path).
        threads: threads in the block (at least ``n`` to cover it, but any count is modelled).
        warp_size: lanes per warp (4 in the lecture's example, 32 on every NVIDIA GPU).
        memory_latency, alu_latency: cycles until a load's or an ALU instruction's result may be read.

    Returns:
        A :class:`Walkthrough` with the issued instructions and the cycle-by-cycle trace.
    """
    n = validate.integer(n, "n", minimum=0, allow_float=False)
    threads = validate.integer(threads, "threads", minimum=1, allow_float=False)
    warp_size = validate.integer(warp_size, "warp_size", minimum=1, allow_float=False)
    memory_latency = validate.integer(memory_latency, "memory_latency", minimum=1, allow_float=False)
    alu_latency = validate.integer(alu_latency, "alu_latency", minimum=1, allow_float=False)
    n_warps = warps_for(threads, warp_size)
    programs = []
    for w in range(n_warps):
        size = min(warp_size, threads - w * warp_size)  # the last warp may be partial: its missing lanes idle
        programs.append(warp_program(n, w * warp_size, size))
    pc = [0] * n_warps
    ready_at = [dict() for _ in range(n_warps)]  # the scoreboard: register -> first cycle it may be read
    issued, trace = [], []
    last = -1
    for cycle in range(max_cycles):
        if all(pc[w] >= len(programs[w]) for w in range(n_warps)):
            break
        row, chosen = {}, None
        for k in range(n_warps):
            w = (last + 1 + k) % n_warps
            if pc[w] >= len(programs[w]):
                row[w] = "done"
                continue
            ins, lanes = programs[w][pc[w]]
            pending = [r for r in ins.reads + ins.writes if ready_at[w].get(r, 0) > cycle]
            if pending:
                row[w] = "waits for " + " ".join(dict.fromkeys(pending))
            elif chosen is None:
                chosen = w
                row[w] = ins.text
                latency = memory_latency if ins.kind == "load" else alu_latency
                for r in ins.writes:
                    ready_at[w][r] = cycle + latency
                issued.append(dict(cycle=cycle, warp=w, lanes=_lanes(lanes), instruction=ins.text))
                pc[w] += 1
            else:
                row[w] = "ready"
        if chosen is not None:
            last = chosen
        trace.append([row[w] for w in range(n_warps)])
    else:
        raise RuntimeError(f"the walk-through did not finish in {max_cycles} cycles")
    trace_df = pd.DataFrame(trace, columns=[f"warp {w}" for w in range(n_warps)]).rename_axis("cycle")
    return Walkthrough(n=n, threads=threads, warp_size=warp_size, memory_latency=memory_latency,
                       alu_latency=alu_latency, issued=pd.DataFrame(issued, columns=["cycle", "warp", "lanes",
                                                                                      "instruction"]),
                       trace=trace_df)
