"""Checkers for the lab "BSP and Amdahl".

Exercises 1-3 take a plain function: it is called on known values and on inputs that expose the usual
mistakes (s = 0, s = 1, a target beyond 1/s, superlinear speedups), and its answer's TYPE is checked
first (:mod:`labhelpers.exercises.answers`: the text "0.5" or a list [0.5] is refused with a message
about the type). Exercise 4's grid-stride kernel is declared for the exercise harness
(:mod:`labhelpers.exercises.harness`) with a grid SMALLER than the array (each thread loops), partial
last blocks, a guard band and the float32 rule. Failures raise :class:`~labhelpers.errors.CheckFailed`
whose message starts with the bug's class and says what to change; on success one line is printed.
"""

from __future__ import annotations

from typing import Callable

import numpy as np
from numba import cuda

from ..device import device_info
from ..errors import CheckFailed
from ..launch import blocks_for
from ..models.amdahl import amdahl_speedup, fit_serial_fraction, karp_flatt, processors_for_speedup
from ..refdata import load_reference
from ..timing import benchmark
from . import answers
from . import harness as h
from . import timed
from ..gpus import current as current_gpu
from ..gpus import reference as reference_gpu
from ..sizes import problem_size

# --------------------------------------------------------------------------- exercise 1: Amdahl


def _amdahl_inputs(k: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    s = rng.random(k)
    s[:2] = [0.0, 1.0][:k]  # the edge cases: no serial part, nothing parallel
    n = rng.integers(1, 10_000, size=k).astype(float)
    return s, n


def check_amdahl(amdahl: Callable) -> None:
    """Check ``amdahl(s, n)`` = Amdahl's speedup, on known values and then on NumPy arrays."""
    known = [((0.1, 10), 1 / 0.19, "The serial part s keeps its full time; only the parallel part 1 - s is divided "
                                    "by n: S = 1 / (s + (1 - s) / n)."), ((0.0, 8), 8.0, "With no serial part (s = 0) the speedup is n."),
             ((1.0, 8), 1.0, "With everything serial (s = 1) more processors do not help: the speedup is 1."),
             ((0.1, 1), 1.0, "On one processor (n = 1) the speedup is 1."),
             ((0.1, 1e12), 1 / (0.1 + 0.9e-12), "With s = 0.1 the speedup approaches 1/s = 10 as n grows.")]
    for (s, n), want, hint in known:
        got = answers.number(answers.call(amdahl, "amdahl", s, n), f"amdahl({s}, {n:g})")
        if not np.isclose(got, want, rtol=1e-9):
            cls = answers.WRONG_ANSWER
            if np.isclose(got, s + (1 - s) * n):
                cls, hint = "Gustafson instead of Amdahl", ("That is Gustafson's scaled speedup s + (1 - s) n; "
                                                             "Amdahl's divides: 1 / (s + (1 - s) / n).")
            raise h.failure(cls, f"amdahl({s}, {n:g}) returned {got:.6g}, expected {want:.6g}. {hint}")
    rng = np.random.default_rng(0)
    for k in (3, 50):
        s, n = _amdahl_inputs(k, rng)
        text = f"amdahl(s, n) on NumPy arrays of {k} values"
        try:
            got = answers.array_of(answers.call(amdahl, "amdahl", s, n), text, (k,))
        except CheckFailed as exc:
            raise CheckFailed(f"{exc} amdahl must work on NumPy arrays as well as on numbers: use arithmetic, "
                              "not `if`, on s and n.") from None
        want = amdahl_speedup(s, n)
        if not np.allclose(got, want, rtol=1e-9, atol=0):
            i = int(np.flatnonzero(~np.isclose(got, want, rtol=1e-9, atol=0))[0])
            raise h.failure(answers.WRONG_ANSWER, f"{text}: element {i} (s = {s[i]:.4g}, n = {n[i]:g}) is "
                                                  f"{got[i]:.6g}, expected {want[i]:.6g}. amdahl must work on "
                                                  "NumPy arrays as well as on numbers: use arithmetic, not `if`, "
                                                  "on s and n.")
    print("Correct: amdahl(s, n) matches Amdahl's law on known values and on arrays.")


# --------------------------------------------------------------------------- exercise 2: processors needed


def check_processors_needed(processors_needed: Callable) -> None:
    """Check ``processors_needed(s, target)``: processors for speedup ``target``, ``inf`` when out of reach.

    The cases include a target exactly AT the bound 1/s (out of reach: a ``>`` where ``>=`` belongs shows).
    """
    cases = [(0.1, 5.0), (0.05, 10.0), (0.0, 100.0), (0.25, 2.0), (0.02, 49.0), (0.1, 10.0), (0.25, 4.0),
             (0.1, 20.0), (0.5, 3.0), (0.3, 1.0), (0.1, 3.0)]
    for s, target in cases:
        want = float(processors_for_speedup(s, target))
        text = f"processors_needed({s}, {target:g})"
        got = answers.number(answers.call(processors_needed, "processors_needed", s, target), text)
        if np.isinf(want):
            if not np.isinf(got) or got < 0:
                why = (" A negative count means the formula was applied past the bound." if got < 0 else "")
                raise h.failure("Out of reach", f"{text} returned {got:.6g}, but no number of processors reaches "
                                f"{target:g}x when s = {s}: the bound is 1/s = {1 / s:.6g}x, and reaching it "
                                "exactly needs infinitely many. Return float('inf') when target >= 1/s." + why)
            continue
        if not np.isclose(got, want, rtol=1e-9):
            cls, hint = answers.WRONG_ANSWER, ""
            if float(got).is_integer() and 0 < abs(got - want) < 1:
                cls, hint = "Rounded", " Return the exact real number; do not round it."
            raise h.failure(cls, f"{text} returned {got:.6g}, expected {want:.6g} (check: amdahl({s}, {want:.6g}) "
                                 f"= {float(amdahl_speedup(s, want)):.6g}).{hint}")
    print(f"Correct: processors_needed gives the right count on {len(cases)} cases, out-of-reach targets included.")


# --------------------------------------------------------------------------- exercise 3: fit s


def _synthetic_speedups(s: float, n: np.ndarray, noise: float, rng: np.random.Generator) -> np.ndarray:
    return amdahl_speedup(s, n) * (1 + noise * rng.standard_normal(n.size))


def check_fit_serial_fraction(fit: Callable) -> None:
    """Check ``fit(n, speedup)``: the least-squares serial fraction of Amdahl's law, clipped to [0, 1]."""
    rng = np.random.default_rng(2)
    n = np.array([1, 2, 4, 8, 16, 32, 64, 128, 132], dtype=float)
    for s in (0.02, 0.1, 0.3):
        speedup = amdahl_speedup(s, n)
        got = answers.number(answers.call(fit, "fit", n, speedup), f"fit on exact Amdahl data with s = {s}")
        if not np.isclose(got, s, rtol=1e-6, atol=1e-9):
            raise h.failure(answers.WRONG_ANSWER, f"On speedups that follow Amdahl's law exactly with s = {s}, your "
                            f"fit returned {got:.6g}. Write 1/S - 1/n = s (1 - 1/n) and solve for s by least squares.")
    for s in (0.01, 0.05, 0.2):
        speedup = _synthetic_speedups(s, n, 0.03, rng)
        want = fit_serial_fraction(n, speedup)
        got = answers.number(answers.call(fit, "fit", n, speedup), f"fit on noisy data around s = {s}")
        if not np.isclose(got, want, rtol=1e-6, atol=1e-9):
            cls, hint = answers.WRONG_ANSWER, ""
            many = n > 1
            if np.isclose(got, np.mean(karp_flatt(speedup[many], n[many])), rtol=1e-6):
                cls, hint = "Karp-Flatt average", (
                    " You averaged the Karp-Flatt values; that is a fine estimate, but this exercise asks the "
                    "least-squares one: s = sum(a * b) / sum(a * a) with a = 1 - 1/n, b = 1/S - 1/n.")
            raise h.failure(cls, f"On noisy speedups around s = {s} your fit returned {got:.6g}; the least-squares "
                                 f"serial fraction is {want:.6g}.{hint}")
    superlinear = np.array([1.0, 2.1, 4.3, 8.8])
    got = answers.number(answers.call(fit, "fit", np.array([1.0, 2.0, 4.0, 8.0]), superlinear),
                         "fit on superlinear speedups")
    if got != 0.0:
        raise h.failure("Not clipped", f"On superlinear speedups (faster than n) your fit returned {got:.6g}: a "
                        "serial fraction cannot be negative, so clip the result to [0, 1] (min(1.0, max(0.0, s))).")
    print("Correct: your fit recovers s from exact data, matches least squares on noisy data, and clips to [0, 1].")


# --------------------------------------------------------------------------- exercise 4: grid-stride kernel

LAB_A = np.float32(0.5)
LAB_B = np.float32(0.25)
LAB_REPS = 3
#: Elements per thread on average: the harness launches ceil(n / (threads * PER_THREAD)) blocks, a grid smaller
#: than the array, so only a loop covers it (and a stride of one block shows once there are two blocks).
PER_THREAD = 3
#: Threads per block tried (a GPU also tries the second list).
THREADS_SIM: tuple[int, ...] = (32,)
THREADS_GPU: tuple[int, ...] = (256,)
#: Message class of an element updated twice or never.
VISITS = "Grid-stride loop"


def fixed_work_spec(x: np.ndarray, a: float = LAB_A, b: float = LAB_B, reps: int = LAB_REPS) -> np.ndarray:
    """NumPy specification of the lab's kernel: ``reps`` times ``v -> a * v + b`` on every element, once."""
    v = np.asarray(x, dtype=np.float32).copy()
    for _ in range(reps):
        v = np.float32(a) * v + np.float32(b)
    return v


def _initial(case: h.Case) -> np.ndarray:
    """The array the kernel updates in place (the same for the arguments and the reference)."""
    return np.random.default_rng([4, case.size]).random(case.size, dtype=np.float32)


def _visits(x: np.ndarray, got: np.ndarray) -> np.ndarray:
    """How many times each element was updated (0 to 4), or -1 where no count explains the value."""
    counts = np.full(x.shape, -1)
    v = x.astype(np.float32).copy()
    for k in range(5):
        counts[(counts < 0) & np.isclose(got, v, rtol=1e-5, atol=1e-6)] = k
        v = fixed_work_spec(v)
    return counts


def _grid_stride_explain(case: h.Case, index: int, got, expected, inputs) -> tuple[str, str] | None:
    counts = _visits(_initial(case), got)
    never, twice = np.flatnonzero(counts == 0), np.flatnonzero(counts >= 2)
    parts = []
    if never.size:
        parts.append(f"{never.size} element(s) were never updated (first: index {never[0]}): keep looping, "
                     "i = start, start + stride, ..., while i < x.size")
    if twice.size:
        parts.append(f"{twice.size} element(s) were updated more than once (first: index {twice[0]}, "
                     f"{counts[twice[0]]} times): the stride must be the number of threads in the whole grid, "
                     "cuda.gridsize(1), not the block's")
    if not parts:
        return None
    return (VISITS, "; ".join(parts) + f" (the grid has fewer threads than the {case.size} elements).")


def grid_stride_exercise() -> h.Exercise:
    """Exercise 4 as declared for the harness: ``kernel(x, a, b, reps)`` in place, on a grid smaller than x."""
    return h.Exercise(
        name="your grid-stride kernel",
        args=lambda c: (h.Out(c.n, np.float32, initial=_initial(c)), LAB_A, LAB_B, LAB_REPS),
        reference=lambda case, x0, a, b, reps: fixed_work_spec(x0, a, b, reps),
        configs=[{"threads": t} for t in THREADS_SIM], configs_gpu=[{"threads": t} for t in THREADS_GPU],
        per_thread=PER_THREAD, sizes=lambda config: (5 * PER_THREAD * config["threads"] + 7,),
        sizes_gpu=(100_003,), dtype=np.float32, rtol=1e-5, atol=1e-6, explain=_grid_stride_explain, seed=4)


def check_grid_stride(kernel, *, quiet: bool = False) -> None:
    """Check an in-place grid-stride kernel ``kernel(x, a, b, reps)`` on grids smaller than the array.

    Every element must get exactly ``reps`` updates ``v -> a * v + b``: the harness launches about one
    thread per :data:`PER_THREAD` elements (partial last blocks, one element, several blocks), so the
    threads must loop with the stride of the whole grid. With ``quiet`` nothing is printed on success.
    """
    h.check(grid_stride_exercise(), kernel, quiet=quiet)


def time_grid_stride(kernel, n: int | None = None, reps: int = 8) -> list:
    """Check ``grid_stride_update`` (:func:`check_grid_stride`), then time it on three grids of this GPU.

    The grids: one warp, one block of 256 threads per SM, and as many such blocks per SM as fill every
    thread slot (8 on the reference GPU's SM, 4 on a T4's: :func:`labhelpers.gpus.current`), over ``n`` float32 elements updated in place with ``reps``
    multiply-adds each; bytes counted: 8 per element (read and written). Nothing is timed unless the
    check passes: an unfinished kernel does no work and looks impossibly fast.

    Returns:
        One :class:`~labhelpers.timing.Timing` per grid (without numbers under the simulator, where each
        grid runs once on a small array).

    Raises:
        CheckFailed: the kernel is not correct yet (the message says what to change).
    """


    try:
        check_grid_stride(kernel, quiet=True)
    except CheckFailed as exc:
        raise CheckFailed(f"grid_stride_update is not timed until it is correct: {exc}") from None
    n = n or problem_size(gpu=2**24, sim=1024)
    sms = device_info().sm_count or 1  # the simulator has no SMs: one
    full = sms * current_gpu().blocks_per_sm(256)  # every thread slot (the reference GPU's SM under the simulator)
    x_d = cuda.to_device(np.random.default_rng(0).random(n, dtype=np.float32))
    timings = []
    for blocks, threads in [(1, 32), (sms, 256), (full, 256)]:
        timings.append(benchmark(lambda: kernel[blocks, threads](x_d, LAB_A, LAB_B, reps), nbytes=8 * n,
                                 repeat=5, label=f"{blocks} x {threads} threads"))
    return timings


# ------------------------------------------------------------------------------------------- measured exercise

#: Blocks of :data:`TUNED_THREADS` threads per SM the measured exercise accepts.
TUNED_BLOCKS_PER_SM: tuple[int, ...] = (1, 2, 4, 8, 16, 32)
TUNED_THREADS = 256
#: Elements and updates per element of the timed launch (GPU).
TUNED_N = 2**25
TUNED_REPS = 8


def _slackness_reference(k: int) -> str:
    ref = load_reference("ch02_slackness")
    rows = ref.table[ref.table["threads"] == TUNED_THREADS]
    per_sm = reference_gpu().sm.max_threads_per_sm  # the reference table was measured on the reference GPU
    row = timed.nearest_row(rows, "fill", k * TUNED_THREADS / per_sm)  # fill: threads / (SMs * threads per SM)
    best = rows.loc[rows["median_ms"].idxmin()]
    return timed.reference_text(
        ref, f"the grid-stride kernel with {int(row.blocks)} blocks of {TUNED_THREADS} threads took "
             f"{row.median_ms:.3g} ms, the largest grid measured ({int(best.blocks)} blocks) {best.median_ms:.3g} ms: "
             f"ratio {best.median_ms / row.median_ms:.2f}")


GRID_STRIDE_TUNED = timed.MeasuredExercise(
    name="your grid of blocks per SM", target=timed.target_for("2", 0.85),
    measures=f"your grid_stride_update on {TUNED_N:,} floats ({TUNED_REPS} updates each) with your blocks per SM",
    yardstick="the same kernel launched with one thread per element", reference=_slackness_reference)


def _race_grid_stride(kernel, k: int) -> tuple:
    x_d = cuda.to_device(np.random.default_rng(0).random(TUNED_N, dtype=np.float32))
    blocks = k * (device_info().sm_count or 1)
    full = blocks_for(TUNED_N, TUNED_THREADS)
    student = benchmark(lambda: kernel[blocks, TUNED_THREADS](x_d, LAB_A, LAB_B, TUNED_REPS), nbytes=8 * TUNED_N,
                        repeat=10, label=f"{blocks} blocks")
    yardstick = benchmark(lambda: kernel[full, TUNED_THREADS](x_d, LAB_A, LAB_B, TUNED_REPS), nbytes=8 * TUNED_N,
                          repeat=10, label=f"{full} blocks")
    return student, yardstick


def check_grid_blocks_per_sm(kernel, choose_blocks_per_sm) -> timed.Verdict:
    """Measured exercise: ``choose_blocks_per_sm()`` returns how many blocks of 256 threads per SM the grid-stride
    kernel is launched with; it must be correct (the harness) and, on a GPU, reach ``GRID_STRIDE_TUNED.target`` times the same
    kernel's speed with one thread per element, measured in the same run.

    Raises:
        CheckFailed: the kernel is wrong (the harness's class), the choice is not allowed, or it is too slow.
    """
    k = timed.choose(choose_blocks_per_sm, "choose_blocks_per_sm", TUNED_BLOCKS_PER_SM)
    return timed.check(GRID_STRIDE_TUNED, k, correct=lambda: check_grid_stride(kernel),
                          race=lambda: _race_grid_stride(kernel, k))
