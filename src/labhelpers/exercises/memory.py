"""Checkers of the lab "The memory hierarchy".

Each checker takes the student's function or kernel as its first argument, tries it on
many cases (awkward ones included), prints one line on success and raises
:class:`~labhelpers.errors.CheckFailed` with a hint on the first wrong answer (its class first; an
answer of the wrong type, a float or a string for a count, is refused as such). The transpose is
declared for the exercise harness (:mod:`labhelpers.exercises.harness`): partial tiles, the race
detector on a partial block, guard bands, float32.

* :func:`check_sectors_per_request`: sectors one warp request touches (exercise 1);
* :func:`check_conflict_degree`: shared-memory bank conflict degree (exercise 2);
* :func:`check_single_cycle`: a pointer-chasing chain that is one cycle through every slot (exercise 3);
* :func:`check_tiled_transpose`: a coalesced transpose through a shared-memory tile (exercise 4).
"""

from __future__ import annotations

from typing import Callable

import numpy as np
import pandas as pd
from numba import cuda

from .. import backend
from ..errors import CheckFailed
from ..launch import blocks_for
from ..kernels import memory as mem_kernels
from ..models import banks
from ..timing import Timing, benchmark
from ..refdata import load_reference
from . import answers
from . import harness as h
from . import timed

#: Side of the square tile of the tiled transpose (one warp wide).
TILE = 32
#: Rows of threads per block of the tiled transpose: each thread moves TILE // TILE_ROWS elements.
TILE_ROWS = 8


# --------------------------------------------------------------------------- exercise 1


def check_sectors_per_request(student: Callable[[int, int, int], int], *, quiet: bool = False) -> None:
    """Check ``student(offset, stride, itemsize)``: sectors one warp touches loading ``a[offset + t * stride]``.

    Tries every offset 0..32 and stride 1..32 for 4-byte elements, and a sample for 8- and
    16-byte elements, against :func:`labhelpers.models.banks.sectors_per_request`.
    """
    cases = [(o, s, 4) for s in range(1, 33) for o in range(0, 33)]
    cases += [(o, s, size) for size in (8, 16) for s in (1, 2, 3, 4, 8) for o in (0, 1, 2, 3)]
    for offset, stride, itemsize in cases:
        args = f"offset={offset}, stride={stride}, itemsize={itemsize}"
        got = answers.whole_number(answers.call(student, "sectors_per_request", offset, stride, itemsize),
                                   f"sectors_per_request({args})")
        expected = banks.sectors_per_request(offset, stride, itemsize)
        if got == expected:
            continue
        hint = "A sector is 32 bytes: the sector of byte address b is b // 32. Count the distinct sectors."
        if got == 32 and stride == 1:
            hint = "You counted threads, not sectors: 32 consecutive 4-byte elements fill only 128 bytes, 4 sectors."
        elif stride == 1 and got == expected - 1:
            hint = ("Shifted by an offset the warp's 128 bytes straddle one more sector boundary: count the sectors "
                    "of the actual byte addresses (offset + t * stride) * itemsize, not 128 / 32.")
        elif got == banks.warp_request(offset, stride, itemsize).lines:
            hint = "You counted 128-byte lines; the question is about 32-byte sectors (four per line)."
        raise h.failure(answers.WRONG_ANSWER, f"sectors_per_request({args}) returned {got}, expected {expected}. "
                                              f"{hint}")
    if not quiet:
        print(f"Correct: sectors_per_request matches the sector model on all {len(cases)} cases tried.")


# --------------------------------------------------------------------------- exercise 2


def _conflict_cases(rng: np.random.Generator) -> list[tuple[str, np.ndarray]]:
    cases = [("every thread reads word 5 (a broadcast)", np.full(32, 5))]
    cases += [(f"shared[t * {s}]", banks.strided_words(s)) for s in range(0, 66)]
    cases += [(f"shared[7 + t * {s}]", banks.strided_words(s, offset=7)) for s in (2, 8, 32, 33)]
    cases += [(f"column {c} of a 32 x {32 + p} tile", banks.tile_column_words(c, 32, p))
              for c in (0, 5) for p in (0, 1, 2)]
    cases += [("threads 0-15 read word 0, threads 16-31 read word 32", np.repeat([0, 32], 16))]
    cases += [("pairs of threads share a word: shared[(t // 2) * 32]", (np.arange(32) // 2) * 32)]
    cases += [("a half warp: shared[t * 4] for 16 threads", banks.strided_words(4, threads=16))]
    cases += [(f"random words (case {k})", rng.integers(0, 256, size=32)) for k in range(40)]
    return cases


def check_conflict_degree(student: Callable[[np.ndarray], int], *, quiet: bool = False) -> None:
    """Check ``student(words)``: the conflict degree of one warp request reading 4-byte words ``words``.

    Tries broadcasts, strided patterns with and without offset, tile columns with and without
    padding, partial warps and random patterns, against :func:`labhelpers.models.banks.conflict_degree`.
    """
    cases = _conflict_cases(np.random.default_rng(3))
    for label, words in cases:
        got = answers.whole_number(answers.call(student, "conflict_degree", words.copy()),
                                   f"conflict_degree for {label}")
        expected = banks.conflict_degree(words)
        if got == expected:
            continue
        hint = "Group the words by bank (word % 32) and count the distinct words in the busiest bank."
        distinct_ignored = int(np.bincount(words % 32, minlength=32).max())
        if got == distinct_ignored and got != expected:
            hint = ("You counted threads per bank. Threads reading the same word are served by one read (a "
                    "broadcast): count distinct words per bank.")
        elif got == 0:
            hint = "Every request needs at least one pass: the degree is at least 1."
        raise h.failure(answers.WRONG_ANSWER, f"conflict_degree for {label} (words {words.tolist()[:8]}...) "
                                              f"returned {got}, expected {expected}. {hint}")
    if not quiet:
        print(f"Correct: conflict_degree matches the bank model on all {len(cases)} access patterns tried.")


# --------------------------------------------------------------------------- exercise 3


def cycle_lengths(next_slot: np.ndarray) -> list[int]:
    """Lengths of the cycles of the permutation ``next_slot`` (longest first)."""
    seen = np.zeros(len(next_slot), dtype=bool)
    lengths = []
    for start in range(len(next_slot)):
        if seen[start]:
            continue
        length, j = 0, start
        while not seen[j]:
            seen[j] = True
            j = int(next_slot[j])
            length += 1
        lengths.append(length)
    return sorted(lengths, reverse=True)


def check_single_cycle(student: Callable[[int, np.random.Generator], np.ndarray], *, quiet: bool = False) -> None:
    """Check ``student(slots, rng)``: a random chain ``next_slot`` that visits all ``slots`` slots in one cycle.

    The result must be an integer array of length ``slots`` holding every slot number once
    (a permutation) that forms a single cycle, and for 8 slots or more it must be random:
    not the sequential chain ``i -> i + 1``, and different for different random generators.
    """
    sizes = (1, 2, 31, 33, 257, 1000)
    for slots in sizes:
        got = answers.call(student, "make_chain", slots, np.random.default_rng(slots))
        if not isinstance(got, np.ndarray):
            raise answers.wrong_type(got, f"make_chain({slots}, rng)", "a NumPy integer array, next_slot")
        if got.shape != (slots,) or got.dtype.kind not in "iu":
            raise h.failure(answers.WRONG_TYPE, f"make_chain({slots}, rng) returned shape {got.shape}, dtype {got.dtype}: return an "
                              f"integer array of length {slots} (next_slot[i] = the slot after slot i).")
        if np.any(got < 0) or np.any(got >= slots) or len(np.unique(got)) != slots:
            raise h.failure("Not a permutation", f"make_chain({slots}, rng) is not a permutation of 0..{slots - 1}: every slot must be "
                              "the successor of exactly one slot.")
        lengths = cycle_lengths(got)
        if len(lengths) > 1:
            raise h.failure(
                "Several cycles", f"make_chain({slots}, rng) splits the slots into {len(lengths)} cycles (lengths {lengths[:6]}...): a "
                f"walk from slot 0 would only ever see {lengths[0] if got[0] == 0 else 'one of them'}, a smaller "
                "working set than you meant to measure. A random permutation is not one cycle; instead link a "
                "random ORDER of the slots: next_slot[order[k]] = order[k + 1], and the last back to the first.")
        if slots >= 8:
            if np.array_equal(got, (np.arange(slots) + 1) % slots):
                raise h.failure("Not random", f"make_chain({slots}, rng) is the sequential chain i -> i + 1: visit the slots in a "
                                  "random order (use rng), so that no prefetcher or DRAM page can guess the next "
                                  "address.")
            again = np.asarray(answers.call(student, "make_chain", slots, np.random.default_rng(slots + 1000)))
            if np.array_equal(got, again):
                raise h.failure("Not random", f"make_chain({slots}, rng) gives the same chain for different generators: draw the "
                                  "random order from the rng argument.")
    if not quiet:
        print(f"Correct: make_chain builds one random cycle through every slot for all {len(sizes)} sizes tried.")


# --------------------------------------------------------------------------- exercise 4


def transpose_launch(shape: tuple[int, int]) -> tuple[tuple[int, int], tuple[int, int]]:
    """Grid and block of the tiled transpose of an array of ``shape``: one (32, 8)-thread block per 32 x 32 tile."""
    rows, cols = shape
    return (blocks_for(cols, TILE), blocks_for(rows, TILE)), (TILE, TILE_ROWS)


def _transpose_explain(case: h.Case, index: int, got, expected, inputs) -> tuple[str, str] | None:
    a = inputs[0]
    if np.isnan(got).any():
        return None  # the harness names unwritten elements
    if np.array_equal(got.ravel(), a.ravel()):
        return ("Not transposed", "the elements are in row order: write tile[tx, ty + k] (the transposed "
                "position) into out, not tile[ty + k, tx].")
    return (h.WRONG_VALUES, "load a[row + k, col] into tile[ty + k, tx], cuda.syncthreads(), then write "
            "tile[tx, ty + k] to out[out_row + k, out_col] with out_row from blockIdx.x and out_col from "
            "blockIdx.y; the tile's padding (TILE + 1 words per row) must be the same in both accesses.")


def transpose_exercise() -> h.Exercise:
    """Exercise 4 as declared for the harness: ``kernel(a, out)``, blocks of (32, 8) threads.

    The harness's grid is ``(ceil(cols / 32), ceil(rows / 8))``: as many block rows as 8-row strips, more
    than :func:`transpose_launch`'s one per 32-row tile; the extra blocks' tiles lie past the last row,
    so a kernel that guards its loads and stores does nothing there (and one that does not is caught).
    """
    return h.Exercise(
        name="your tiled transpose",
        args=lambda c: (c.floats(), h.Out((c.n[1], c.n[0]), np.float32)),
        reference=lambda case, a: a.T, configs=[{"threads": (TILE, TILE_ROWS)}],
        sizes=lambda config: TRANSPOSE_SHAPES_SIM, sizes_gpu=TRANSPOSE_SHAPES_GPU, dtype=np.float32, rtol=0,
        atol=0, explain=_transpose_explain, seed=3)


#: Shapes (rows, cols) tried besides the harness's own; a GPU also tries a large odd one.
TRANSPOSE_SHAPES_SIM: tuple[tuple[int, int], ...] = ()
TRANSPOSE_SHAPES_GPU: tuple[tuple[int, int], ...] = ((1025, 999),)


def check_tiled_transpose(kernel, *, quiet: bool = False) -> None:
    """Check a tiled transpose kernel ``kernel(a, out)`` (``out[c, r] = a[r, c]``) on awkward shapes.

    Blocks of (32, 8) threads: each thread moves TILE // TILE_ROWS = 4 elements in and 4 out. The race
    detector runs on two blocks with partial tiles (a missing or conditional barrier shows).
    """
    h.check(transpose_exercise(), kernel, quiet=quiet)


def compare_transposes(kernel, naive_kernel, n: int | None = None) -> dict[str, Timing]:
    """Time ``naive_kernel`` (one thread per element) and the tiled ``kernel`` on an ``n x n`` float32 matrix.

    Returns the :class:`~labhelpers.timing.Timing` objects (no numbers under the simulator),
    with ``nbytes`` counting the matrix read once and written once. The tiled kernel is checked
    first: until it transposes correctly only the naive one is timed (a kernel that does
    nothing would look very fast).
    """

    try:
        check_tiled_transpose(kernel, quiet=True)
    except CheckFailed:
        print("Your transpose_tiled does not pass the check yet: timing only the naive kernel.")
        kernel = None
    n = n or (64 if backend.is_simulator() else 8192)
    a_d = cuda.to_device(np.random.default_rng(0).standard_normal((n, n)).astype(np.float32))
    out_d = cuda.device_array((n, n), dtype=np.float32)
    naive_grid = (blocks_for(n, TILE), blocks_for(n, TILE_ROWS))
    grid, block = transpose_launch((n, n))
    nbytes = 2 * n * n * 4
    timings = {"naive": benchmark(lambda: naive_kernel[naive_grid, block](a_d, out_d), nbytes=nbytes,
                                  label=f"naive transpose {n}x{n}")}
    if kernel is not None:
        timings["tiled"] = benchmark(lambda: kernel[grid, block](a_d, out_d), nbytes=nbytes,
                                     label=f"tiled transpose {n}x{n}")
    return timings


# ------------------------------------------------------------------------------------------- measured exercise

#: Matrix side the transpose is timed on (GPU).
TUNED_SIDE = 8192


def _transpose_reference(_choice) -> str:
    coalescing = load_reference("ch03_coalescing_stride")
    copies = load_reference("ch07_copy_variants")
    row = timed.nearest_row(coalescing.table, "stride", 32)
    ceiling = float(copies.table["gbps"].max())
    return timed.reference_text(
        coalescing, f"the reference set has no transpose; its strided read at stride {int(row.stride)} (a naive "
                    f"transpose's column access) reached {row.gbps:,.0f} GB/s, {row.gbps / ceiling:.2f} of the copy "
                    f"ceiling ({ceiling:,.0f} GB/s, same run): the tiled transpose exists to stay far above that")


TRANSPOSE_TUNED = timed.MeasuredExercise(
    name="your tiled transpose", target=timed.target_for("3", 0.5),
    measures=f"your transpose_tiled on a {TUNED_SIDE} x {TUNED_SIDE} float32 matrix, in GB/s (read once, written once)",
    yardstick="the copy ceiling (a device-to-device copy)", reference=_transpose_reference)


def _race_transpose(kernel) -> tuple:
    a_d = cuda.to_device(np.random.default_rng(0).standard_normal((TUNED_SIDE, TUNED_SIDE)).astype(np.float32))
    out_d = cuda.device_array((TUNED_SIDE, TUNED_SIDE), dtype=np.float32)
    grid, block = transpose_launch((TUNED_SIDE, TUNED_SIDE))
    nbytes = 2 * TUNED_SIDE * TUNED_SIDE * 4
    student = benchmark(lambda: kernel[grid, block](a_d, out_d), nbytes=nbytes, label="transpose_tiled")
    return student, timed.time_copy_of(nbytes)


def check_transpose_speed(kernel) -> timed.Verdict:
    """Measured exercise: the tiled transpose must be correct (the harness) and, on a GPU, move its bytes at ``TRANSPOSE_TUNED.target`` of
    the copy ceiling measured in the same run (a naive transpose reaches about a quarter).

    Raises:
        CheckFailed: the kernel is wrong (the harness's class) or too slow (``Below target``).
    """
    return timed.check(TRANSPOSE_TUNED, "tiles of 32 x 32, blocks of (32, 8)",
                          correct=lambda: check_tiled_transpose(kernel), race=lambda: _race_transpose(kernel))


# ------------------------------------------------------------------------------ predict, then measure (issue 26)

#: (rows, cols, itemsize, copy_gbs) cases of :func:`check_transpose_bound`: arguments, not a GPU's figures.
BOUND_CASES: tuple[tuple[int, int, int, float], ...] = (
    (1000, 3000, 8, 250.0), (8192, 8192, 4, 3000.0), (4096, 512, 4, 3000.0))


def _bound_hint(got: float, rows: int, cols: int, itemsize: int, gbs: float) -> str:
    want = 2 * rows * cols * itemsize / (gbs * 1e9) * 1e3
    if np.isclose(got, want / 2, rtol=1e-6):
        return "a transpose reads every element AND writes it: 2 * itemsize bytes per element"
    if np.isclose(got, want / itemsize, rtol=1e-6):
        return f"count bytes, not elements: {itemsize} bytes per element"
    if np.isclose(got, want * 1e3, rtol=1e-6) or np.isclose(got, want / 1e3, rtol=1e-6):
        return "bytes / (GB/s * 1e9) is seconds: times 1000 for milliseconds"
    return f"bytes moved = 2 * rows * cols * itemsize; time = bytes / ({gbs:g}e9 B/s)"


def check_transpose_bound(predict_transpose_ms: Callable) -> None:
    """Predict, then measure: ``predict_transpose_ms(rows, cols, itemsize, copy_gbs)`` returns the least time in ms
    of a transpose of a ``rows x cols`` matrix of ``itemsize``-byte elements (every element read once and written
    once) at the copy ceiling ``copy_gbs`` (GB/s, 10^9 bytes per second).

    Raises:
        CheckFailed: the function raises, returns something that is not a number, or the wrong number
            (:data:`labhelpers.exercises.answers.WRONG_ANSWER`, with what the number looks like).
    """
    answers.check_formula(predict_transpose_ms, "predict_transpose_ms",
                          "predict_transpose_ms(rows, cols, itemsize, copy_gbs)",
                          BOUND_CASES,
                          lambda rows, cols, itemsize, gbs: 2 * rows * cols * itemsize / (gbs * 1e9) * 1e3,
                          shown=lambda got, want: f"{got:.6g} ms, the bound is {want:.6g} ms",
                          hint=_bound_hint)
    print(f"Correct: your bound equals bytes moved over the copy ceiling on all {len(BOUND_CASES)} cases.")


def _time_naive_transpose(side: int) -> Timing:
    a_d = cuda.to_device(np.random.default_rng(0).standard_normal((side, side)).astype(np.float32))
    out_d = cuda.device_array((side, side), dtype=np.float32)
    grid, block = (blocks_for(side, TILE), blocks_for(side, TILE_ROWS)), (TILE, TILE_ROWS)
    return benchmark(lambda: mem_kernels.transpose_naive[grid, block](a_d, out_d), nbytes=2 * side * side * 4,
                     label=f"naive transpose {side}x{side}")


def show_transpose_bound(predict_transpose_ms: Callable) -> pd.DataFrame:
    """Your bound (checked first by :func:`check_transpose_bound`) for a :data:`TUNED_SIDE` square float32 transpose
    beside measured times: on a GPU the copy ceiling and the naive transpose are timed now; under the simulator the
    reference GPU's copy ceiling (``ch07_copy_variants``) and its strided read at stride 32 (``ch03_coalescing_stride``,
    a naive transpose's column access, scaled to the same bytes) stand in.

    Raises:
        CheckFailed: the prediction is wrong (as :func:`check_transpose_bound`).
    """
    check_transpose_bound(predict_transpose_ms)
    side, nbytes = TUNED_SIDE, 2 * TUNED_SIDE * TUNED_SIDE * 4
    if timed.can_time():
        copy = timed.time_copy_of(nbytes)
        naive = _time_naive_transpose(side)
        copy_gbs, rows = copy.gbps, [("naive transpose, measured now", naive.median_ms),
                                     ("a copy of the same bytes, measured now", nbytes / (copy.gbps * 1e9) * 1e3)]
        print(f"Measured now on this GPU: copy ceiling {copy_gbs:,.0f} GB/s.")
    else:
        coalescing = load_reference("ch03_coalescing_stride")
        copy_gbs = float(load_reference("ch07_copy_variants").table["gbps"].max())
        strided = timed.nearest_row(coalescing.table, "stride", 32)
        rows = [("a copy of the same bytes (reference copy ceiling)", nbytes / (copy_gbs * 1e9) * 1e3),
                ("stride-32 access, as a naive transpose's column (reference)",
                 nbytes / (float(strided.gbps) * 1e9) * 1e3)]
        print(timed.reference_text(coalescing, f"Measured (copy ceiling {copy_gbs:,.0f} GB/s)"))
    bound = answers.number(answers.call(predict_transpose_ms, "predict_transpose_ms", side, side, 4, copy_gbs),
                           "predict_transpose_ms")
    return pd.DataFrame([{"what": what, "your bound (ms)": round(bound, 4), "measured (ms)": round(ms, 4),
                          "measured / bound": round(ms / bound, 2)} for what, ms in rows])
