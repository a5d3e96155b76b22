"""Checkers of the lab "Scheduling: warps, divergence, occupancy".

Each takes the student's function or kernel first and raises :class:`~labhelpers.errors.CheckFailed`
with a message that says what to change; on success it prints one line.

* :func:`check_blocks_per_sm`: occupancy by hand on the lab's SM (:data:`LAB_SM`).
* :func:`check_warps_to_hide`: Little's law for the warp scheduler, judged by the simulation.
* :func:`check_even_odd_sorted`: a divergence-free version of an even/odd branch.
* :func:`check_shared_for_blocks`: the shared memory that throttles an SM to ``k`` blocks;
  :func:`measure_throttle_with` times the chapter's throttle experiment with it, once it passes.
"""

from __future__ import annotations

import dataclasses
from typing import Callable

import numpy as np
from numba import cuda

from ..arrays import to_host
from ..checkers import diagnose
from ..errors import CheckFailed, LaunchConfigError
from ..experiments.scheduling import measure_throttle
from ..kernels.scheduling import lcg_inputs, lcg_reference
from ..launch import blocks_for
from ..models import occupancy as occ
from ..models import warp_timeline
from ..sizes import awkward_sizes

#: The SM of the lab's first exercise: an H100 SM, with the register file treated as one pool
#: (the real one is split between the SM's 4 schedulers; the calculator models that).
LAB_SM = dataclasses.replace(occ.HOPPER_H100, name="H100 SM, one register pool", register_partitions=1)

#: Configurations exercise 1 is checked on: (threads per block, registers per thread, shared bytes per block).
BLOCKS_CASES = [
    (256, 32, 0), (256, 64, 0), (128, 40, 0), (1024, 16, 0), (32, 16, 0), (100, 32, 0), (96, 168, 0),
    (512, 72, 0), (64, 16, 40_000), (256, 20, 12_000), (128, 30, 49_152), (1000, 24, 3_000), (768, 40, 0),
    (64, 255, 0), (192, 50, 20_000), (33, 8, 100), (64, 16, 32_768), (32, 16, 7_168), (128, 37, 0), (256, 50, 0),
    (64, 16, 32_276),
]


def _int_result(value, what: str, args) -> int:
    if value is None:
        raise CheckFailed(f"{what} returned None for {args}: return the number.")
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise CheckFailed(f"{what} returned {value!r} ({type(value).__name__}) for {args}: return a whole number "
                          "(use // for integer division, and math.ceil or -(-a // b) to round up).")
    return int(value)


def _variant_blocks(threads: int, regs: int, shared: int, sm: occ.SMLimits) -> int | None:
    try:
        return occ.occupancy(threads, regs, shared, sm).blocks_per_sm
    except LaunchConfigError:
        return None


#: The usual mistakes of exercise 1, each as the SM it amounts to, with the fix.
_MISTAKES = {
    "the 1 KB of shared memory the driver reserves for every block is missing":
        dataclasses.replace(LAB_SM, reserved_shared_per_block=0),
    "shared memory is allocated in units of 128 B: round the block's shared memory (reserved part included) up "
    "to a multiple of 128": dataclasses.replace(LAB_SM, shared_unit=1),
    "registers are allocated per warp: registers x 32, rounded up to a multiple of 256":
        dataclasses.replace(LAB_SM, register_unit=1),
    "an SM holds at most 32 blocks, however small they are": dataclasses.replace(LAB_SM, max_blocks_per_sm=10**6),
}


def _mistake(student: Callable, args, got: int) -> str:
    """Name the usual mistake that explains the student's answers, or describe the right limits for ``args``."""
    answers = {}
    for case in BLOCKS_CASES:
        try:
            answers[case] = student(*case)
        except Exception:
            answers[case] = None
    for text, sm in _MISTAKES.items():
        if all(answers[c] == _variant_blocks(*c, sm) for c in BLOCKS_CASES):
            return text
    threads, regs, shared = args
    if threads % 32 and threads > 32 and got == _variant_blocks(threads - threads % 32, regs, shared, LAB_SM):
        return "a partly filled warp still takes a whole warp slot: warps per block = ceil(threads / 32)"
    result = occ.occupancy(threads, regs, shared, LAB_SM)
    if got == result.warps_per_sm:
        return "that is the number of resident warps: return blocks"
    return (f"the four limits are {result.limits} blocks (threads, blocks, registers, shared memory), "
            "and the SM holds the smallest")


def check_blocks_per_sm(student: Callable[[int, int, int], int]) -> None:
    """Check ``student(threads, registers, shared) -> blocks per SM`` on :data:`LAB_SM`."""
    for args in BLOCKS_CASES:
        correct = occ.occupancy(*args, LAB_SM).blocks_per_sm
        try:
            value = student(*args)
        except NotImplementedError:
            raise CheckFailed("blocks_per_sm is not written yet.") from None
        got = _int_result(value, "blocks_per_sm", args)
        if got != correct:
            threads, regs, shared = args
            raise CheckFailed(f"blocks_per_sm({threads}, {regs}, {shared}) returned {got}, expected {correct}: "
                              f"{_mistake(student, args, got)}.")
    print(f"Correct: blocks_per_sm agrees with the occupancy calculator on all {len(BLOCKS_CASES)} configurations.")


#: (burst, stall) pairs exercise 2 is checked on, the lecture's G80 case first.
WARPS_CASES = [(20, 50), (20, 40), (10, 0), (1, 3), (7, 100), (32, 31), (4, 600), (50, 50)]


def check_warps_to_hide(student: Callable[[int, int], int]) -> None:
    """Check ``student(burst, stall) -> fewest warps that keep the scheduler busy every cycle``.

    The judge is the cycle-by-cycle simulation (:func:`labhelpers.models.warp_timeline.simulate`),
    not a formula.
    """
    for burst, stall in WARPS_CASES:
        try:
            value = student(burst, stall)
        except NotImplementedError:
            raise CheckFailed("warps_to_hide is not written yet.") from None
        got = _int_result(value, "warps_to_hide", (burst, stall))
        cycles = 4 * (burst + stall)
        if got < 1:
            raise CheckFailed(f"warps_to_hide({burst}, {stall}) returned {got}: at least one warp must run.")
        busy = warp_timeline.simulate(got, burst, stall, cycles=cycles).utilisation
        if busy < 1.0:
            raise CheckFailed(
                f"warps_to_hide({burst}, {stall}) returned {got}, but with {got} warps the scheduler issues in only "
                f"{busy:.0%} of the cycles: while one warp waits {stall} cycles, the others must fill them with bursts "
                f"of {burst}, and the stalled warp itself was working before. Round up.")
        if got > 1 and warp_timeline.simulate(got - 1, burst, stall, cycles=cycles).utilisation == 1.0:
            raise CheckFailed(f"warps_to_hide({burst}, {stall}) returned {got}, but {got - 1} warps already keep the "
                              "scheduler busy every cycle: find the fewest.")
    print(f"Correct: warps_to_hide matches the simulated scheduler on all {len(WARPS_CASES)} cases "
          "(G80: 20-cycle bursts, 50-cycle stalls -> 4 warps).")


def even_odd_reference(x: np.ndarray, steps: int) -> np.ndarray:
    """NumPy specification of the lab's even/odd kernel: even elements get ``steps`` LCG steps, odd ones are copied."""
    out = np.asarray(x, dtype=np.int64).copy()
    out[0::2] = lcg_reference(out[0::2], steps)
    return out


def check_even_odd_sorted(kernel, steps: int = 3, threads: int = 64) -> None:
    """Check the divergence-free even/odd kernel ``kernel[blocks, threads](x, out, who, steps)``.

    Three things are checked on awkward sizes: ``out`` matches :func:`even_odd_reference`;
    ``who[j]`` records one thread per element (every element handled exactly once); and
    every warp handles only even or only odd elements, except at most one warp at the
    boundary between the two halves.
    """
    for n in awkward_sizes():
        x = lcg_inputs(n, seed=n)
        x_d = cuda.to_device(x)
        out_d = cuda.to_device(np.full(n, -1, dtype=np.int64))
        who_d = cuda.to_device(np.full(n, -1, dtype=np.int64))
        blocks = blocks_for(n, threads)
        try:
            kernel[blocks, threads](x_d, out_d, who_d, steps)
        except IndexError as exc:
            raise CheckFailed(f"your kernel read or wrote outside an array for n={n} ({exc}): threads whose element "
                              "index j is >= n must do nothing.") from None
        out, who = to_host(out_d), to_host(who_d)
        problem = diagnose(out, even_odd_reference(x, steps), rtol=0, atol=0)
        if problem:
            raise CheckFailed(f"your kernel computes wrong values for n={n}: {problem}. Each element j must still "
                              "get the expensive steps if j is even and a copy if j is odd, whichever thread does it.")
        if (who < 0).any() or len(np.unique(who)) != n or who.max() >= blocks * threads:
            raise CheckFailed(f"for n={n}, who[] does not name exactly one thread per element (write who[j] = i in "
                              "the thread that handles element j, and map threads to elements one to one).")
        warp = who // 32
        parity = np.arange(n) % 2
        mixed = [int(w) for w in np.unique(warp) if len(np.unique(parity[warp == w])) > 1]
        if len(mixed) > 1:
            raise CheckFailed(f"for n={n}, {len(mixed)} warps (e.g. warps {mixed[:3]}) handle both even and odd "
                              "elements, so they run both branches one after the other. Map the first half of the "
                              "threads to the even elements and the second half to the odd ones.")
    print(f"Correct: your kernel matches NumPy on all {len(awkward_sizes())} sizes and no more than one warp "
          "(at the boundary) takes both branches.")


#: Resident blocks per SM that exercise 4 must be able to ask for (64-thread blocks on an H100).
SHARED_TARGETS = tuple(range(4, 33))


def check_shared_for_blocks(student: Callable[[int], int], threads: int = 64, *, quiet: bool = False) -> None:
    """Check ``student(k) -> dynamic shared bytes per block`` that lets exactly ``k`` blocks share an H100 SM."""
    sm = occ.HOPPER_H100
    for k in SHARED_TARGETS:
        try:
            value = student(k)
        except NotImplementedError:
            raise CheckFailed("shared_for_blocks is not written yet.") from None
        s = _int_result(value, "shared_for_blocks", k)
        if not 0 <= s <= sm.shared_per_block:
            raise CheckFailed(f"shared_for_blocks({k}) returned {s:,} B: a block may ask for 0 to "
                              f"{sm.shared_per_block:,} B of dynamic shared memory without opting in.")
        result = occ.occupancy(threads, 16, s, sm)
        if result.blocks_per_sm != k:
            alloc = result.shared_allocated_per_block
            lo = -(-(sm.shared_per_sm // (k + 1) + 1) // sm.shared_unit) * sm.shared_unit
            hi = sm.shared_per_sm // k // sm.shared_unit * sm.shared_unit
            raise CheckFailed(
                f"with shared_for_blocks({k}) = {s:,} B per block an SM holds {result.blocks_per_sm} blocks of "
                f"{threads} threads, not {k}. Each block is allocated {alloc:,} B (your bytes plus the 1 KB the driver reserves, "
                f"rounded up to 128 B); {k} blocks share the {sm.shared_per_sm // 1024} KB exactly when that "
                f"allocation is between {lo:,} and {hi:,} B: more than 228 KB / (k + 1), at most 228 KB / k.")
    if not quiet:
        print(f"Correct: shared_for_blocks gives exactly k resident blocks for every k from {SHARED_TARGETS[0]} to "
              f"{SHARED_TARGETS[-1]}.")


def measure_throttle_with(student: Callable[[int], int], n: int = 2**26):
    """The chapter's throttle experiment (:func:`labhelpers.experiments.scheduling.measure_throttle`) with the
    student's ``shared_for_blocks``, measured only once it passes :func:`check_shared_for_blocks`.

    Pass it to :func:`labhelpers.live_or_reference` with ``fallback_on=(CheckFailed,)``: until the function is
    right, nothing runs and the reference GPU's measurements are shown, with the check's message saying why.

    Raises:
        CheckFailed: ``student`` does not pass :func:`check_shared_for_blocks` yet.
    """
    check_shared_for_blocks(student, quiet=True)
    return measure_throttle(n, shared_for=student)
