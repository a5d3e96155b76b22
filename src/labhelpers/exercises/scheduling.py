"""Checkers of the lab "Scheduling: warps, divergence, occupancy".

Each takes the student's function or kernel first and raises :class:`~labhelpers.errors.CheckFailed`
with a message that starts with the mistake's class and says what to change; on success it prints one
line. Answers that must be whole numbers are type-checked first (:mod:`labhelpers.exercises.answers`);
the kernel is declared for the exercise harness (:mod:`labhelpers.exercises.harness`).

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
from .. import backend, gpus
from ..errors import LaunchConfigError
from ..launch import warps_for
from ..experiments.scheduling import THROTTLE_BLOCKS, measure_throttle
from ..kernels.scheduling import lcg_inputs, lcg_reference
from ..kernels.scheduling import launch_scale, scale_bytes, scale_grid
from ..models import occupancy as occ
from ..models import scheduling as warp_timeline
from ..timing import benchmark
from ..refdata import load_reference
from . import answers
from . import harness as h
from . import timed

#: The SM of the lab's first exercise: an H100 SM, with the register file treated as one pool
#: (the real one is split between the SM's 4 schedulers; the calculator models that).
LAB_SM = dataclasses.replace(gpus.HOPPER_H100, name="H100 SM, one register pool", register_partitions=1)

#: Configurations exercise 1 is checked on: (threads per block, registers per thread, shared bytes per block).
BLOCKS_CASES = [
    (256, 32, 0), (256, 64, 0), (128, 40, 0), (1024, 16, 0), (32, 16, 0), (100, 32, 0), (96, 168, 0),
    (512, 72, 0), (64, 16, 40_000), (256, 20, 12_000), (128, 30, 49_152), (1000, 24, 3_000), (768, 40, 0),
    (64, 255, 0), (192, 50, 20_000), (33, 8, 100), (64, 16, 32_768), (32, 16, 7_168), (128, 37, 0), (256, 50, 0),
    (64, 16, 32_276),
]


def _int_result(value, what: str, args) -> int:
    shown = args if isinstance(args, tuple) else (args,)
    return answers.whole_number(value, f"{what}({', '.join(map(repr, shown))})")


def _variant_blocks(threads: int, regs: int, shared: int, sm: gpus.SMLimits) -> int | None:
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
        got = _int_result(answers.call(student, "blocks_per_sm", *args), "blocks_per_sm", args)
        if got != correct:
            threads, regs, shared = args
            raise h.failure(answers.WRONG_ANSWER, f"blocks_per_sm({threads}, {regs}, {shared}) returned {got}, "
                                                  f"expected {correct}: {_mistake(student, args, got)}.")
    print(f"Correct: blocks_per_sm agrees with the occupancy calculator on all {len(BLOCKS_CASES)} configurations.")


#: (burst, stall) pairs exercise 2 is checked on, the lecture's G80 case first.
WARPS_CASES = [(20, 50), (20, 40), (10, 0), (1, 3), (7, 100), (32, 31), (4, 600), (50, 50)]


def check_warps_to_hide(student: Callable[[int, int], int]) -> None:
    """Check ``student(burst, stall) -> fewest warps that keep the scheduler busy every cycle``.

    The judge is the cycle-by-cycle simulation (:func:`labhelpers.models.scheduling.simulate`),
    not a formula.
    """
    for burst, stall in WARPS_CASES:
        got = _int_result(answers.call(student, "warps_to_hide", burst, stall), "warps_to_hide", (burst, stall))
        cycles = 4 * (burst + stall)
        if got < 1:
            raise h.failure(answers.WRONG_ANSWER, f"warps_to_hide({burst}, {stall}) returned {got}: at least one warp "
                                                  "must run.")
        busy = warp_timeline.simulate(got, burst, stall, cycles=cycles).utilisation
        if busy < 1.0:
            raise h.failure(
                "Too few warps", f"warps_to_hide({burst}, {stall}) returned {got}, but with {got} warps the scheduler issues in only "
                f"{busy:.0%} of the cycles: while one warp waits {stall} cycles, the others must fill them with bursts "
                f"of {burst}, and the stalled warp itself was working before. Round up.")
        if got > 1 and warp_timeline.simulate(got - 1, burst, stall, cycles=cycles).utilisation == 1.0:
            raise h.failure("Too many warps", f"warps_to_hide({burst}, {stall}) returned {got}, but {got - 1} warps already keep the "
                              "scheduler busy every cycle: find the fewest.")
    print(f"Correct: warps_to_hide matches the simulated scheduler on all {len(WARPS_CASES)} cases "
          "(G80: 20-cycle bursts, 50-cycle stalls -> 4 warps).")


def even_odd_reference(x: np.ndarray, steps: int) -> np.ndarray:
    """NumPy specification of the lab's even/odd kernel: even elements get ``steps`` LCG steps, odd ones are copied."""
    out = np.asarray(x, dtype=np.int64).copy()
    out[0::2] = lcg_reference(out[0::2], steps)
    return out


#: Threads per block of the even/odd exercise (a GPU also tries 256), and sizes tried besides the harness's.
EVEN_ODD_THREADS = 64
EVEN_ODD_SIZES_SIM: tuple[int, ...] = (2, 31, 33, 200)
EVEN_ODD_SIZES_GPU: tuple[int, ...] = (100_003,)
#: Message classes of the even/odd exercise.
DIVERGENT = "Divergent warps"
NOT_ONE_TO_ONE = "Threads not one to one"


def _even_odd_args(case: h.Case, who_is_output: bool) -> tuple:
    """x, out, who, steps; ``who`` is an Out only for the mapping check (the harness compares ``out``)."""
    x = lcg_inputs(case.size, seed=case.size)
    who = h.Out(case.n, np.int64, fill=-1) if who_is_output else np.full(case.n, -1, np.int64)
    return (x, h.Out(case.n, np.int64, fill=-1), who, case["steps"])


def _even_odd_exercise(steps: int, threads: int, who_is_output: bool) -> h.Exercise:
    return h.Exercise(
        name="your kernel", args=lambda case: _even_odd_args(case, who_is_output),
        reference=lambda case, x, *_: even_odd_reference(x, case["steps"]),
        configs=[{"threads": threads, "steps": steps}],
        configs_gpu=[] if threads == 256 else [{"threads": 256, "steps": steps}],
        sizes=lambda config: EVEN_ODD_SIZES_SIM, sizes_gpu=EVEN_ODD_SIZES_GPU, seed=4)


def even_odd_exercise(steps: int = 3, threads: int = EVEN_ODD_THREADS) -> h.Exercise:
    """Exercise 3's values as declared for the harness: ``out`` of ``kernel(x, out, who, steps)`` (int64)."""
    return _even_odd_exercise(steps, threads, who_is_output=False)


def _mapping_problem(who: np.ndarray, n: int, where: str) -> h.CheckFailed | None:
    if (who < 0).any() or len(np.unique(who)) != n:
        return h.failure(NOT_ONE_TO_ONE, f"{where}, who[] does not name exactly one thread per element: write "
                         "who[j] = i in the thread that handles element j, and map threads to elements one to one.")
    warp, parity = who // 32, np.arange(n) % 2
    mixed = [int(w) for w in np.unique(warp) if len(np.unique(parity[warp == w])) > 1]
    if len(mixed) > 1:
        return h.failure(DIVERGENT, f"{where}, {len(mixed)} warps (e.g. warps {mixed[:3]}) handle both even and odd "
                         "elements, so they run both branches one after the other. Map the first half of the "
                         "threads to the even elements and the second half to the odd ones.")
    return None


def check_even_odd_sorted(kernel, steps: int = 3, threads: int = EVEN_ODD_THREADS) -> None:
    """Check the divergence-free even/odd kernel ``kernel[blocks, threads](x, out, who, steps)``.

    The harness checks ``out`` against :func:`even_odd_reference` (partial last blocks, guard bands);
    then, on the same sizes, ``who[j]`` must name one thread per element (every element handled
    exactly once) and every warp must handle only even or only odd elements, except at most one warp
    at the boundary between the two halves.
    """
    h.check(even_odd_exercise(steps, threads), kernel, quiet=True)
    mapping = _even_odd_exercise(steps, threads, who_is_output=True)
    sizes = []
    for config in mapping.configs if backend.is_simulator() else [*mapping.configs, *mapping.configs_gpu]:
        t = config["threads"]
        for n in [*h.awkward_sizes(t), *mapping.sizes(config)]:
            case = h.Case(n, t, {k: v for k, v in config.items() if k != "threads"}, None, np.random.default_rng(n))
            _out, who = h.launch_case(mapping, kernel, case, mapping.args(case))
            problem = _mapping_problem(who[:n], n, f"for n={n} with {t} threads per block")
            if problem:
                raise problem
            sizes.append(n)
    print(f"Correct: your kernel matches NumPy on all {len(sizes)} sizes tried and no more than one warp "
          "(at the boundary) takes both branches.")


#: Resident blocks per SM that exercise 4 asks for on an H100 SM (64-thread blocks); see :func:`shared_targets`.
SHARED_TARGETS = tuple(range(4, 33))


def shared_targets(sm: gpus.SMLimits, threads: int = 64) -> tuple[int, ...]:
    """The ``k`` of exercise 4 on ``sm``: from 4 to the most blocks of ``threads`` threads the SM can hold
    (32 on an H100, 16 on a T4)."""
    most = min(sm.max_blocks_per_sm, sm.max_threads_per_sm // threads)
    return tuple(range(4, most + 1))


def check_shared_for_blocks(student: Callable[[int, gpus.SMLimits], int], threads: int = 64, *,
                            sm: gpus.SMLimits | None = None, quiet: bool = False) -> None:
    """Check ``student(k, sm) -> dynamic shared bytes per block`` that lets exactly ``k`` blocks share ``sm``.

    ``sm`` defaults to the SM of the GPU the code runs on (``gpus.current().sm``:
    an H100's under the simulator); ``k`` runs over :func:`shared_targets`.
    """
    sm = sm or gpus.current().sm
    targets = shared_targets(sm, threads)
    kb = sm.shared_per_sm // 1024
    for k in targets:
        s = _int_result(answers.call(student, "shared_for_blocks", k, sm), "shared_for_blocks", k)
        if not 0 <= s <= sm.shared_per_block:
            raise h.failure(answers.WRONG_ANSWER, f"shared_for_blocks({k}, sm) returned {s:,} B: a block may ask for 0 "
                              f"to {sm.shared_per_block:,} B of dynamic shared memory without opting in.")
        result = occ.occupancy(threads, 16, s, sm)
        if result.blocks_per_sm != k:
            alloc = result.shared_allocated_per_block
            lo = -(-(sm.shared_per_sm // (k + 1) + 1) // sm.shared_unit) * sm.shared_unit  # not launch geometry: bytes, in allocation units
            hi = sm.shared_per_sm // k // sm.shared_unit * sm.shared_unit
            reserved = (f"your bytes plus the {sm.reserved_shared_per_block:,} B the driver reserves"
                        if sm.reserved_shared_per_block else "your bytes")
            raise h.failure(
                answers.WRONG_ANSWER, f"with shared_for_blocks({k}, sm) = {s:,} B per block an SM of {sm.name} holds "
                f"{result.blocks_per_sm} blocks of {threads} threads, not {k}. Each block is allocated {alloc:,} B "
                f"({reserved}, rounded up to {sm.shared_unit} B); {k} blocks share the {kb} KB exactly when that "
                f"allocation is between {lo:,} and {hi:,} B: more than {kb} KB / (k + 1), at most {kb} KB / k.")
    if not quiet:
        print(f"Correct: shared_for_blocks gives exactly k resident blocks on an SM of {sm.name} for every k from "
              f"{targets[0]} to {targets[-1]}.")


def measure_throttle_with(student: Callable[[int, gpus.SMLimits], int], n: int = 2**26):
    """The chapter's throttle experiment (:func:`labhelpers.experiments.scheduling.measure_throttle`) with the
    student's ``shared_for_blocks``, measured only once it passes :func:`check_shared_for_blocks`.

    Pass it to :func:`labhelpers.live_or_reference` with ``fallback_on=(CheckFailed,)``: until the function is
    right, nothing runs and the reference GPU's measurements are shown, with the check's message saying why.

    Raises:
        CheckFailed: ``student`` does not pass :func:`check_shared_for_blocks` yet.
    """
    sm = gpus.current().sm
    check_shared_for_blocks(student, sm=sm, quiet=True)
    return measure_throttle(n, blocks_per_sm=[k for k in THROTTLE_BLOCKS if k in shared_targets(sm)],
                            shared_for=lambda k: student(k, sm))


# ------------------------------------------------------------------------------------------- measured exercise

#: Block sizes the measured exercise accepts (chapter 4's sweep) and the yardsticks timed beside the choice.
TUNED_THREADS: tuple[int, ...] = (32, 64, 96, 128, 192, 256, 384, 512, 768, 1024)
TUNED_YARDSTICKS: tuple[int, ...] = (128, 256, 512)
#: Registers per thread of chapter 4's scale kernel (its resource usage on the reference GPU).
SCALE_REGISTERS = 22
TUNED_N = 2**26


def _block_size_reference(threads: int) -> str:
    ref = load_reference("ch04_block_size_sweep")
    rows = ref.table[ref.table["ilp"] == 1]
    row = timed.nearest_row(rows, "threads", threads)
    best = rows.loc[rows["gbps"].idxmax()]
    return timed.reference_text(
        ref, f"scale (one load in flight) at {int(row.threads)} threads per block, one full wave: "
             f"{row.gbps:,.0f} GB/s at occupancy {row.occupancy:.2f}; the best block size ({int(best.threads)}) "
             f"{best.gbps:,.0f} GB/s: ratio {row.gbps / best.gbps:.2f}")


SCALE_TUNED = timed.MeasuredExercise(
    name="scale at your block size", target=timed.target_for("4", 0.95),
    measures=f"chapter 4's scale kernel on {TUNED_N:,} floats at your block size, one full wave of blocks, in GB/s",
    yardstick=f"the fastest of {', '.join(map(str, TUNED_YARDSTICKS))} threads per block",
    reference=_block_size_reference)


def _race_scale(threads: int) -> tuple:
    x_d = cuda.to_device(np.random.default_rng(0).random(TUNED_N, dtype=np.float32))
    out_d = cuda.device_array_like(x_d)
    sm = gpus.current().sm

    def time_at(t: int):
        per_sm = occ.occupancy(t, SCALE_REGISTERS, 0, sm).blocks_per_sm
        blocks = scale_grid(TUNED_N, t, 1, per_sm)
        return benchmark(lambda: launch_scale(x_d, out_d, 2.0, t, 1, 0, blocks), nbytes=scale_bytes(TUNED_N),
                         label=f"{t} threads")

    best = max((time_at(t) for t in TUNED_YARDSTICKS), key=lambda timing: timing.gbps)
    return time_at(threads), best


def check_scale_threads(blocks_per_sm: Callable[[int, int, int], int],
                        choose_threads: Callable[[], int]) -> timed.Verdict:
    """Measured exercise ("predict, then measure"): ``choose_threads()`` picks a block size for chapter 4's scale
    kernel; your ``blocks_per_sm`` (exercise 1, checked first) predicts its occupancy, and on a GPU the choice must
    reach 0.95 of the best of 128, 256 and 512 threads per block measured in the same run.

    Raises:
        CheckFailed: ``blocks_per_sm`` is wrong, the choice is not allowed, or it is too slow (``Below target``).
    """
    threads = timed.choose(choose_threads, "choose_threads", TUNED_THREADS)

    def correct() -> None:
        check_blocks_per_sm(blocks_per_sm)
        k = _int_result(answers.call(blocks_per_sm, "blocks_per_sm", threads, SCALE_REGISTERS, 0), "blocks_per_sm",
                        (threads, SCALE_REGISTERS, 0))
        warps = warps_for(threads)
        print(f"Your prediction: {k} blocks of {threads} threads per SM on the lab's SM, {k * warps} of "
              f"{LAB_SM.max_warps_per_sm} warp slots (occupancy {k * warps / LAB_SM.max_warps_per_sm:.2f}).")

    return timed.check(SCALE_TUNED, threads, correct=correct, race=lambda: _race_scale(threads))
