"""Checkers for the lab "Profiling and the roofline".

1. :func:`check_matvec_counts`: count the flops and bytes of ``y = A x`` by hand.
2. :func:`check_roofline_time`: the time the roofline predicts for a kernel.
3. :func:`check_ridge_fma_count`: where the FMA-per-element kernel turns from memory to compute bound.
4. :func:`check_read_sum`: a grid-stride kernel that reads an array once (the read-bandwidth ceiling);
   :func:`time_read_sum` times it on a GPU and puts it on this GPU's roofline, among the labs' points, only
   after the same check passed.

Each takes the student's function (or kernel) first, tries several cases, and raises
:class:`~labhelpers.errors.CheckFailed` with a message that starts with the mistake's class and says what
to change. Numbers are type-checked first (:mod:`labhelpers.exercises.answers`: the text "0.5" or a list
is refused as such); ``read_sum`` is declared for the exercise harness (:mod:`labhelpers.exercises.harness`).
"""

from __future__ import annotations

import math
from typing import Callable

import numpy as np
from numba import cuda

from ..errors import CheckFailed
from ..kernels.roofline import full_grid
from ..roofline.measure import measure_point
from ..sizes import problem_size
from ..refdata import load_reference
from ..timing import Timing
from . import answers
from . import harness as h
from . import timed


def _close(a: float, b: float, rtol: float = 1e-6) -> bool:
    return math.isclose(a, b, rel_tol=rtol, abs_tol=1e-12)


# ------------------------------------------------------------------------------------ 1. counting

#: ``(m, n, itemsize)`` cases: small ones expose a forgotten vector, itemsize 8 a hard-coded 4.
MATVEC_CASES = ((1, 1, 4), (3, 5, 4), (1000, 7, 4), (7, 1000, 8), (64, 64, 2))


def matvec_expected(m: int, n: int, itemsize: int) -> tuple[int, int]:
    """Flops and bytes of ``y = A x`` (A: m x n): a multiply-add per element of A; A, x read once, y written."""
    return 2 * m * n, (m * n + n + m) * itemsize


def check_matvec_counts(student: Callable[[int, int, int], tuple], quiet: bool = False) -> None:
    """Check ``student(m, n, itemsize) -> (flops, nbytes)`` for the matrix-vector product ``y = A x``.

    Raises:
        CheckFailed: for the first case that is wrong, with the likely mistake.
    """
    for m, n, itemsize in MATVEC_CASES:
        text = f"matvec_counts({m}, {n}, {itemsize})"
        flops, nbytes = answers.numbers(answers.call(student, "matvec_counts", m, n, itemsize), text, 2,
                                        "(flops, nbytes)")
        want_flops, want_bytes = matvec_expected(m, n, itemsize)
        case = f"m={m}, n={n}, itemsize={itemsize}"
        if not _close(flops, want_flops):
            hint = ""
            if _close(flops, m * n):
                hint = " You counted one flop per element of A: a multiply-add is two (a multiply and an add)."
            elif _close(flops, 0):
                hint = " The flops are still 0: count them."
            raise h.failure(answers.WRONG_ANSWER, f"flops are wrong for {case}: got {flops}, expected {want_flops} (2 per element of A)."
                              + hint)
        if not _close(nbytes, want_bytes):
            hint = ""
            if _close(nbytes, m * n * itemsize):
                hint = " You counted A only: x is read too (n elements) and y is written (m elements)."
            elif _close(nbytes, (m * n + n + m) * 4):
                hint = " Multiply by itemsize, not by 4: this case has itemsize " + str(itemsize) + "."
            elif _close(nbytes, (2 * m * n + m) * itemsize):
                hint = " x is small and stays in cache: it is read from device memory once (n elements), not m times."
            elif _close(nbytes, m * n + n + m):
                hint = " That is a count of elements: multiply by itemsize to get bytes."
            elif _close(nbytes, 0):
                hint = " The bytes are still 0: count them."
            raise h.failure(answers.WRONG_ANSWER, f"bytes are wrong for {case}: got {nbytes}, expected {want_bytes}." + hint)
    if not quiet:
        print(f"Correct: matvec_counts matches on all {len(MATVEC_CASES)} cases (intensity of a large float32 "
              f"matvec: {2 / 4:.2f} FLOP/byte).")


# --------------------------------------------------------------------------------- 2. roofline time


def roofline_time_expected(flops: float, nbytes: float, bandwidth_gbs: float, peak_gflops: float) -> float:
    """The roofline's lower bound on the time, in ms: the slower of moving the bytes and doing the flops."""
    return max(nbytes / (bandwidth_gbs * 1e9), flops / (peak_gflops * 1e9)) * 1e3


def _time_cases() -> list[tuple[float, float, float, float]]:
    cases = [(2e9, 12e9, 3000.0, 60000.0), (1e12, 1e8, 3000.0, 60000.0), (6e10, 3e9, 3000.0, 60000.0),
             (0.0, 1e9, 1000.0, 1000.0), (1e9, 0.0, 1000.0, 1000.0)]
    rng = np.random.default_rng(7)
    for _ in range(5):
        cases.append((float(10 ** rng.uniform(6, 13)), float(10 ** rng.uniform(6, 11)), float(rng.uniform(300, 5000)),
                      float(rng.uniform(5000, 70000))))
    return cases


def check_roofline_time(student: Callable[[float, float, float, float], float], quiet: bool = False) -> None:
    """Check ``student(flops, nbytes, bandwidth_gbs, peak_gflops) -> milliseconds``."""
    for flops, nbytes, bw, peak in _time_cases():
        got = answers.number(answers.call(student, "roofline_time_ms", flops, nbytes, bw, peak),
                             f"roofline_time_ms({flops:.3g}, {nbytes:.3g}, {bw:.6g}, {peak:.6g})")
        want = roofline_time_expected(flops, nbytes, bw, peak)
        if _close(got, want):
            continue
        t_mem, t_comp = nbytes / (bw * 1e9) * 1e3, flops / (peak * 1e9) * 1e3
        case = f"flops={flops:.3g}, nbytes={nbytes:.3g}, bandwidth {bw:,.0f} GB/s, peak {peak:,.0f} GFLOP/s"
        hint = ""
        if _close(got, t_mem + t_comp):
            hint = (" You added the two times: the memory system and the arithmetic units work at the same time, "
                    "so the kernel takes as long as the slower of the two (the larger), not their sum.")
        elif _close(got, min(t_mem, t_comp)):
            hint = " You took the faster of the two: the kernel cannot finish before the slower one (take the larger)."
        elif _close(got * 1e3, want) or _close(got * 1e6, want):
            hint = " The units are off: GB/s and GFLOP/s are 1e9 per second, and the answer is in milliseconds."
        elif _close(got, want * 1e3) or _close(got, want * 1e6):
            hint = " The units are off: divide by 1e9 for GB/s and GFLOP/s, then convert seconds to milliseconds."
        elif _close(got, 0):
            hint = " The time is still 0: compute it."
        raise h.failure(answers.WRONG_ANSWER, f"roofline_time_ms is wrong for {case}: got {got}, expected {want:.6g} ms "
                          f"(memory needs {t_mem:.4g} ms, arithmetic {t_comp:.4g} ms)." + hint)
    if not quiet:
        print("Correct: roofline_time_ms matches the roofline on all cases (memory bound, compute bound, the ridge).")


# --------------------------------------------------------------------------------------- 3. ridge

RIDGE_CASES = ((3350.0, 67000.0, 4), (2000.0, 51000.0, 4), (900.0, 7800.0, 8), (320.0, 8100.0, 4),
               (4800.0, 34000.0, 8))


def ridge_fma_expected(bandwidth_gbs: float, peak_gflops: float, itemsize: int) -> float:
    """FMAs per element where ``fma_per_element``'s intensity ``nfma / itemsize`` equals the balance ``P / B``."""
    return itemsize * peak_gflops / bandwidth_gbs


def check_ridge_fma_count(student: Callable[[float, float, int], float], quiet: bool = False) -> None:
    """Check ``student(bandwidth_gbs, peak_gflops, itemsize) -> FMAs per element at the ridge``."""
    for bw, peak, itemsize in RIDGE_CASES:
        got = answers.number(answers.call(student, "ridge_fma_count", bw, peak, itemsize),
                             f"ridge_fma_count({bw:.6g}, {peak:.6g}, {itemsize})")
        want = ridge_fma_expected(bw, peak, itemsize)
        if _close(got, want):
            continue
        case = f"bandwidth {bw:,.0f} GB/s, peak {peak:,.0f} GFLOP/s, itemsize {itemsize}"
        hint = ""
        if _close(got, want / 2):
            hint = (" Half the answer: each element is loaded *and* stored, so the kernel moves 2 * itemsize bytes "
                    "per element.")
        elif _close(got, want * 2):
            hint = " Twice the answer: one FMA is two flops (a multiply and an add)."
        elif _close(got, want / itemsize):
            hint = " You left out the element size: intensity is flops per *byte*."
        elif _close(got, 0):
            hint = " The count is still 0: compute it."
        raise h.failure(answers.WRONG_ANSWER, f"ridge_fma_count is wrong for {case}: got {got}, expected {want:.6g}." + hint)
    if not quiet:
        print(f"Correct: ridge_fma_count matches on all {len(RIDGE_CASES)} GPUs tried.")


# ------------------------------------------------------------------------------------ 4. read_sum

#: Threads per block of ``read_sum``'s check, and elements per thread: the grid is about a quarter of the array.
READ_SUM_THREADS = 32
READ_SUM_PER_THREAD = 4


def read_sum_reference(x: np.ndarray, threads_total: int) -> np.ndarray:
    """What ``read_sum`` must write: thread ``t``'s sum of ``x[t], x[t + T], x[t + 2T], ...`` (T threads in all)."""
    out = np.zeros(threads_total, dtype=np.float64)
    for t in range(threads_total):
        out[t] = x[t::threads_total].astype(np.float64).sum()
    return out.astype(np.float32)


def _threads_total(case: h.Case) -> int:
    return h.grid_for(case.n, case.threads, READ_SUM_PER_THREAD) * case.threads


def _read_sum_explain(case: h.Case, index: int, got, expected, inputs) -> tuple[str, str] | None:
    x, total = inputs[0], _threads_total(case)
    if np.isnan(got).any():
        return None
    if np.allclose(got, 0):
        return ("Grid-stride loop", "every sum is 0: add x[i] to acc inside a loop that steps i by the grid's size "
                "(`while i < x.size:` ... `i += stride`).")
    one_each = np.where(np.arange(total) < x.size, np.pad(x, (0, max(0, total - x.size)))[:total], 0)
    if np.allclose(got, one_each):
        return ("Grid-stride loop", "each thread read a single element: with fewer threads than elements, loop "
                "over x[i], x[i + stride], x[i + 2 * stride], ... (stride = cuda.gridsize(1)).")
    return ("Grid-stride loop", "thread t sums x[t], x[t + stride], ... with stride = cuda.gridsize(1) (all the "
            "threads of the grid), and writes the sum to out[t].")


def read_sum_exercise() -> h.Exercise:
    """Exercise 4 as declared for the harness: ``read_sum(x, out)`` on a grid smaller than x, one output per thread."""
    return h.Exercise(
        name="read_sum",
        args=lambda c: ((c.rng.random(c.n) + 0.5).astype(np.float32), h.Out(_threads_total(c), np.float32)),
        reference=lambda case, x: read_sum_reference(x, _threads_total(case)),
        configs=[{"threads": READ_SUM_THREADS}], configs_gpu=[{"threads": 256}], per_thread=READ_SUM_PER_THREAD,
        sizes=lambda config: (2, 5 * READ_SUM_PER_THREAD * config["threads"] + 7), sizes_gpu=(2**20 + 7,),
        dtype=np.float32, rtol=1e-3, atol=1e-4, explain=_read_sum_explain, seed=7)


def check_read_sum(kernel, quiet: bool = False) -> None:
    """Check a ``read_sum(x, out)`` kernel: each thread sums its grid-stride share of ``x`` into ``out[thread]``.

    The harness launches about one thread per four elements (partial last blocks, one element, several
    blocks), so only a grid-stride loop with the whole grid's stride covers every element.
    """
    h.check(read_sum_exercise(), kernel, quiet=quiet)


#: The name the lab's ``read_sum`` gets on this GPU's roofline (among the labs' points).
READ_SUM_POINT = "read_sum (lab 7)"


def time_read_sum(kernel, n: int | None = None, threads: int = 256, *, record: bool = True) -> Timing:
    """Check ``read_sum`` (:func:`check_read_sum`), then time it over ``n`` float32 elements on a grid that fills
    the GPU; bytes counted: ``4 n`` read, flops: ``n`` additions.

    Nothing is timed unless the check passes, so an unfinished kernel, which reads nothing and looks
    impossibly fast, never lands on a roofline. With ``record`` (on a GPU) the point is added to this GPU's
    roofline as a lab point (``source="lab"``: :func:`labhelpers.roofline.load_points` shows it only with
    ``include_labs=True``).

    Returns:
        A :class:`~labhelpers.timing.Timing` (no numbers under the simulator, where the kernel runs once on a
        small array).

    Raises:
        CheckFailed: ``read_sum`` is not correct yet (the message says what to change).
    """
    try:
        check_read_sum(kernel, quiet=True)
    except CheckFailed as exc:
        raise CheckFailed(f"read_sum is not timed until it is correct: {exc}") from None
    n = n or problem_size(gpu=2**28, sim=2048)
    blocks, threads = full_grid(threads)
    x = cuda.to_device(np.ones(n, dtype=np.float32))
    out = cuda.device_array(blocks * threads, dtype=np.float32)
    return measure_point(READ_SUM_POINT, lambda: kernel[blocks, threads](x, out), flops=n, nbytes=4 * n,
                         chapter="07", source="lab", record=record, label="read_sum", number=5, repeat=10)


# ------------------------------------------------------------------------------------------- measured exercise

#: Block sizes the measured exercise accepts (the grid fills the GPU: one wave at that size).
TUNED_THREADS: tuple[int, ...] = (32, 64, 128, 256, 512, 1024)


def _read_sum_reference(threads: int) -> str:
    copies = load_reference("ch07_copy_variants")
    best = copies.table.loc[copies.table["gbps"].idxmax()]
    return timed.reference_text(
        copies, f"no read-only kernel in the reference set at {threads} threads; its copy ceiling is "
                f"{best.gbps:,.0f} GB/s ({best.kernel}), and a read-only stream should reach at least "
                f"{timed.target_for('7', 0.8):g} of it")


READ_SUM_TUNED = timed.MeasuredExercise(
    name="read_sum at your block size", target=timed.target_for("7", 0.8),
    measures="your read_sum over 2^28 floats on a grid filling the GPU at your block size, in GB/s (read only)",
    yardstick="the copy ceiling (a device-to-device copy)", reference=_read_sum_reference)


def check_read_sum_threads(kernel, choose_threads) -> timed.Verdict:
    """Measured exercise: find a ceiling. ``read_sum`` (exercise 4, checked first) at the block size
    ``choose_threads()`` picks must, on a GPU, read at 0.8 of the copy ceiling measured in the same run.

    Raises:
        CheckFailed: the kernel is wrong (the harness's class), the choice is not allowed, or too slow.
    """
    threads = timed.choose(choose_threads, "choose_threads", TUNED_THREADS)

    def race() -> tuple:
        student = time_read_sum(kernel, threads=threads, record=False)
        return student, timed.time_copy_of(2 * student.nbytes)

    return timed.check(READ_SUM_TUNED, threads, correct=lambda: check_read_sum(kernel), race=race)
