"""Checkers for the lab "BSP and Amdahl".

Each checker takes the student's function (or kernel) first, tries it on known values
and awkward inputs, and raises :class:`~labhelpers.errors.CheckFailed` with a message
that says what to change. On success it prints one line.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from ..checkers import check_function
from ..errors import CheckFailed
from ..models.amdahl import amdahl_speedup, fit_serial_fraction, karp_flatt, processors_for_speedup

# --------------------------------------------------------------------------- exercise 1: Amdahl


def _amdahl_inputs(k: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    s = rng.random(k)
    s[:2] = [0.0, 1.0][:k]  # the edge cases: no serial part, nothing parallel
    n = rng.integers(1, 10_000, size=k).astype(float)
    return s, n


def _fmt_args(args: tuple) -> str:
    shown = [f"<array of {a.size}>" if isinstance(a, np.ndarray) else repr(a) for a in args]
    return "(" + ", ".join(shown) + ")"


def _call(fn: Callable, what: str, *args, hint: str = ""):
    """Call the student's ``fn``; turn an exception into a CheckFailed that names the call."""
    try:
        return fn(*args)
    except CheckFailed:
        raise
    except ZeroDivisionError as exc:
        raise CheckFailed(f"{what}{_fmt_args(args)} divided by zero ({exc}): handle s = 0 (no serial part, no "
                          "bound) separately, or compute with NumPy floats.") from None
    except Exception as exc:  # report any error in the student's code with the call that caused it
        raise CheckFailed(f"{what}{_fmt_args(args)} raised {type(exc).__name__}: {exc}.{hint}") from None


def _as_float(value, what: str, args: str) -> float:
    try:
        return float(np.asarray(value).reshape(()))
    except (TypeError, ValueError):
        raise CheckFailed(f"{what}{args} returned {value!r}: return a number.") from None


def check_amdahl(amdahl: Callable) -> None:
    """Check ``amdahl(s, n)`` = Amdahl's speedup, on known values and then on NumPy arrays."""
    known = [((0.1, 10), 1 / 0.19, "The serial part s keeps its full time; only the parallel part 1 - s is divided "
                                    "by n: S = 1 / (s + (1 - s) / n)."), ((0.0, 8), 8.0, "With no serial part (s = 0) the speedup is n."),
             ((1.0, 8), 1.0, "With everything serial (s = 1) more processors do not help: the speedup is 1."),
             ((0.1, 1), 1.0, "On one processor (n = 1) the speedup is 1."),
             ((0.1, 1e12), 1 / (0.1 + 0.9e-12), "With s = 0.1 the speedup approaches 1/s = 10 as n grows.")]
    for (s, n), want, hint in known:
        got = _as_float(_call(amdahl, "amdahl", s, n), "amdahl", f"({s}, {n:g})")
        if not np.isclose(got, want, rtol=1e-9):
            extra = ""
            if np.isclose(got, s + (1 - s) * n):
                extra = " That is Gustafson's scaled speedup s + (1 - s) n; Amdahl's divides: 1 / (s + (1 - s) / n)."
            raise CheckFailed(f"amdahl({s}, {n:g}) returned {got:.6g}, expected {want:.6g}. {hint}{extra}".strip())
    arrays = " amdahl must work on NumPy arrays as well as on numbers: use arithmetic, not `if`, on s and n."
    check_function(lambda s, n: _call(amdahl, "amdahl", s, n, hint=arrays), amdahl_speedup, _amdahl_inputs,
                   sizes=(3, 50), rtol=1e-9, atol=0, what="amdahl(s, n) on NumPy arrays", quiet=True)
    print("Correct: amdahl(s, n) matches Amdahl's law on known values and on arrays.")


# --------------------------------------------------------------------------- exercise 2: processors needed


def check_processors_needed(processors_needed: Callable) -> None:
    """Check ``processors_needed(s, target)``: processors for speedup ``target``, ``inf`` when out of reach."""
    cases = [(0.1, 5.0), (0.05, 10.0), (0.0, 100.0), (0.25, 2.0), (0.02, 49.0), (0.1, 10.0), (0.1, 20.0),
             (0.5, 3.0), (0.3, 1.0)]
    for s, target in cases:
        want = float(processors_for_speedup(s, target))
        got = _as_float(_call(processors_needed, "processors_needed", s, target), "processors_needed",
                        f"({s}, {target:g})")
        if np.isinf(want):
            if not np.isinf(got) or got < 0:
                why = (" A negative count means the formula was applied past the bound." if got < 0 else "")
                raise CheckFailed(
                    f"processors_needed({s}, {target:g}) returned {got:.6g}, but no number of processors reaches "
                    f"{target:g}x when s = {s}: the bound is 1/s = {1 / s:.6g}x. Return float('inf') when "
                    f"target >= 1/s.{why}")
            continue
        if not np.isclose(got, want, rtol=1e-9):
            hint = ""
            if float(got).is_integer() and 0 < abs(got - want) < 1:
                hint = " Return the exact real number; do not round it."
            raise CheckFailed(f"processors_needed({s}, {target:g}) returned {got:.6g}, expected {want:.6g} "
                              f"(check: amdahl({s}, {want:.6g}) = {float(amdahl_speedup(s, want)):.6g}).{hint}")
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
        got = _as_float(_call(fit, "fit", n, speedup), "fit", f" on exact Amdahl data with s = {s}")
        if not np.isclose(got, s, rtol=1e-6, atol=1e-9):
            raise CheckFailed(f"On speedups that follow Amdahl's law exactly with s = {s}, your fit returned "
                              f"{got:.6g}. Write 1/S - 1/n = s (1 - 1/n) and solve for s by least squares.")
    for s in (0.01, 0.05, 0.2):
        speedup = _synthetic_speedups(s, n, 0.03, rng)
        want = fit_serial_fraction(n, speedup)
        got = _as_float(_call(fit, "fit", n, speedup), "fit", f" on noisy data around s = {s}")
        if not np.isclose(got, want, rtol=1e-6, atol=1e-9):
            hint = ""
            many = n > 1
            if np.isclose(got, np.mean(karp_flatt(speedup[many], n[many])), rtol=1e-6):
                hint = (" You averaged the Karp-Flatt values; that is a fine estimate, but this exercise asks the "
                        "least-squares one: s = sum(a * b) / sum(a * a) with a = 1 - 1/n, b = 1/S - 1/n.")
            raise CheckFailed(f"On noisy speedups around s = {s} your fit returned {got:.6g}; the least-squares "
                              f"serial fraction is {want:.6g}.{hint}")
    superlinear = np.array([1.0, 2.1, 4.3, 8.8])
    got = _as_float(_call(fit, "fit", np.array([1.0, 2.0, 4.0, 8.0]), superlinear), "fit",
                    " on superlinear speedups")
    if got != 0.0:
        raise CheckFailed(f"On superlinear speedups (faster than n) your fit returned {got:.6g}: a serial fraction "
                          "cannot be negative, so clip the result to [0, 1] (min(1.0, max(0.0, s))).")
    print("Correct: your fit recovers s from exact data, matches least squares on noisy data, and clips to [0, 1].")


# --------------------------------------------------------------------------- exercise 4: grid-stride kernel

#: Grids the kernel checker launches: fewer threads than elements, more, and sizes that divide nothing.
LAB_GRIDS: tuple[tuple[int, int], ...] = ((1, 32), (3, 64), (5, 96))
LAB_A = np.float32(0.5)
LAB_B = np.float32(0.25)
LAB_REPS = 3
#: What the checker puts after the array: not the fixed point of v -> a * v + b (0.5), so an update there shows.
PADDING_VALUE = np.float32(-7.0)


def fixed_work_spec(x: np.ndarray, a: float = LAB_A, b: float = LAB_B, reps: int = LAB_REPS) -> np.ndarray:
    """NumPy specification of the lab's kernel: ``reps`` times ``v -> a * v + b`` on every element, once."""
    v = np.asarray(x, dtype=np.float32).copy()
    for _ in range(reps):
        v = np.float32(a) * v + np.float32(b)
    return v


def _visits(x: np.ndarray, got: np.ndarray) -> np.ndarray:
    """How many times each element was updated (0 to 4), or -1 where no count explains the value."""
    counts = np.full(x.shape, -1)
    v = x.astype(np.float32).copy()
    for k in range(5):
        counts[(counts < 0) & np.isclose(got, v, rtol=1e-5, atol=1e-6)] = k
        v = fixed_work_spec(v)
    return counts


def _visit_hint(x: np.ndarray, got: np.ndarray) -> str:
    counts = _visits(x, got)
    never, twice = np.flatnonzero(counts == 0), np.flatnonzero(counts >= 2)
    parts = []
    if never.size:
        parts.append(f"{never.size} element(s) were never updated (first: index {never[0]}): keep looping, "
                     "i = start, start + stride, ..., while i < x.size")
    if twice.size:
        parts.append(f"{twice.size} element(s) were updated more than once (first: index {twice[0]}, "
                     f"{counts[twice[0]]} times): the stride must be the number of threads in the whole grid, "
                     "cuda.gridsize(1), not the block's")
    return (" " + "; ".join(parts) + ".") if parts else ""


def check_grid_stride(kernel, *, quiet: bool = False) -> None:
    """Check an in-place grid-stride kernel ``kernel(x, a, b, reps)`` on several grids and awkward sizes.

    Every element must get exactly ``reps`` updates ``v -> a * v + b`` whatever the grid:
    smaller than the array (threads loop) or larger (extra threads do nothing). With ``quiet``
    nothing is printed on success.
    """
    from numba import cuda

    for blocks, threads in LAB_GRIDS:
        last: dict = {}

        def run(x: np.ndarray) -> np.ndarray:
            # x is the view of a buffer padded with one whole grid of PADDING_VALUE: on a GPU, which does not
            # check bounds, a write past the end lands in the padding (the simulator raises IndexError instead).
            n = x.size
            last.pop("got", None)
            last["x"] = x.copy()
            buf = np.full(n + blocks * threads, PADDING_VALUE, dtype=x.dtype)
            buf[:n] = x
            buf_d = cuda.to_device(buf)
            kernel[blocks, threads](buf_d[:n], LAB_A, LAB_B, LAB_REPS)
            full = buf_d.copy_to_host()
            stray = int(np.count_nonzero(full[n:] != PADDING_VALUE))
            if stray:
                raise CheckFailed(
                    f"your kernel on a grid of {blocks} x {threads} threads wrote past the end of x for n={n}: "
                    f"{stray} element(s) after the array changed (here the checker's padding; in a real program "
                    "someone else's data). Every index must pass a bounds check: loop while i < x.size.")
            last["got"] = full[:n]
            return last["got"]

        try:
            check_function(run, fixed_work_spec, lambda n, rng: (rng.random(n, dtype=np.float32),),
                           what=f"your kernel on a grid of {blocks} x {threads} threads", quiet=True)
        except CheckFailed as exc:
            hint = _visit_hint(last["x"], last["got"]) if "got" in last else ""
            raise CheckFailed(f"{exc}{hint}") from None
    if not quiet:
        print(f"Correct: every element updated exactly once on {len(LAB_GRIDS)} grids (smaller and larger than the "
              "array) and all awkward sizes.")


def time_grid_stride(kernel, n: int | None = None, reps: int = 8) -> list:
    """Check ``grid_stride_update`` (:func:`check_grid_stride`), then time it on three grids of this GPU.

    The grids: one warp, one block of 256 threads per SM, and eight such blocks per SM (every thread
    slot of a GPU with 2048 threads per SM), over ``n`` float32 elements updated in place with ``reps``
    multiply-adds each; bytes counted: 8 per element (read and written). Nothing is timed unless the
    check passes: an unfinished kernel does no work and looks impossibly fast.

    Returns:
        One :class:`~labhelpers.timing.Timing` per grid (without numbers under the simulator, where each
        grid runs once on a small array).

    Raises:
        CheckFailed: the kernel is not correct yet (the message says what to change).
    """
    from numba import cuda

    from ..device import device_info
    from ..sizes import problem_size
    from ..timing import benchmark

    try:
        check_grid_stride(kernel, quiet=True)
    except CheckFailed as exc:
        raise CheckFailed(f"grid_stride_update is not timed until it is correct: {exc}") from None
    n = n or problem_size(gpu=2**24, sim=1024)
    sms = device_info().sm_count or 1  # the simulator has no SMs: one
    x_d = cuda.to_device(np.random.default_rng(0).random(n, dtype=np.float32))
    timings = []
    for blocks, threads in [(1, 32), (sms, 256), (sms * 8, 256)]:
        timings.append(benchmark(lambda: kernel[blocks, threads](x_d, LAB_A, LAB_B, reps), nbytes=8 * n,
                                 repeat=5, label=f"{blocks} x {threads} threads"))
    return timings
