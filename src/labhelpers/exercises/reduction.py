"""Checkers for the lab "Parallel reduction" (labs/06_reduction_lab.ipynb).

Every kernel exercise is declared for the exercise harness (:mod:`labhelpers.exercises.harness`): the
block-sum kernels ``kernel(x, partial)`` are launched once over ``x`` (one partial sum per block: the
further passes add partial sums with the same kernel, so the first pass decides) on sizes with a
partial last block, one element, several blocks; the race detector runs on two blocks, the last one
partial (a barrier inside ``if tid < stride`` and a missing barrier in the tree show there); inputs are
small integers stored as float32, so every sum is exact and compared exactly; memory after ``x`` holds
NaN and ``partial`` starts as NaN. The histogram runs on a grid smaller than the data (grid-stride) with
several blocks, on uniform and one-bin data, and its final additions into ``counts`` must be atomic
(blocks run one after another in the simulator, so a plain ``+=`` race never shows in a run there: it is
read from the source). Failures raise :class:`~labhelpers.errors.CheckFailed`, the bug's class first.
"""

from __future__ import annotations

import ast
import inspect
import textwrap
from typing import Any

import numpy as np
import pandas as pd
from numba import cuda

from .. import backend
from ..kernels.reduction import integer_valued
from ..launch import blocks_for
from ..source import source_of
from ..timing import benchmark
from ..refdata import load_reference
from . import answers
from . import harness as h
from . import timed

#: Threads per block tried under the simulator (one and two warps) and, besides, on a GPU.
THREADS_SIM: tuple[int, ...] = (32, 64)
THREADS_GPU: tuple[int, ...] = (256, 1024)
#: Sizes tried besides the harness's (1, B - 1, B + 1), and on a GPU only.
SIZES_SIM: tuple[int, ...] = (2, 200)
SIZES_GPU: tuple[int, ...] = (1023, 2**20 + 7)
#: Bins of the histogram exercise (the lab's ``NBINS``), and elements per thread of its grid (smaller than n).
NBINS = 16
HISTOGRAM_PER_THREAD = 4
#: Names of the warp-shuffle intrinsics.
SHUFFLES = ("shfl_down_sync", "shfl_xor_sync", "shfl_up_sync", "shfl_sync")
#: Message classes of this lab.
RACE_ON_FINAL_ADD = "Race on the final add (no atomics)"
TREE = "Reduction tree"
NOT_ZEROED = "Shared histogram not zeroed"
COUNTED_TWICE = "Counted twice"


def _block_sums(case: h.Case, x: np.ndarray, per_thread: int) -> np.ndarray:
    per_block = case.threads * per_thread
    blocks = h.grid_for(case.n, case.threads, per_thread)
    padded = np.zeros(blocks * per_block, dtype=np.float64)
    padded[:x.size] = x
    return padded.reshape(blocks, per_block).sum(axis=1).astype(np.float32)


def _reduction_explain(per_thread: int, hint: str | None):
    def explain(case: h.Case, index: int, got, expected, inputs) -> tuple[str, str] | None:
        x = inputs[0]
        if np.isnan(got).any():
            return None  # the harness names unwritten partial sums
        per_block = case.threads * per_thread
        bad = int(np.flatnonzero(got != expected)[0])
        first = bad * per_block
        first_half = float(np.sum(x[first:first + case.threads], dtype=np.float64))
        if got[bad] == 0 and expected[bad] != 0:
            return (TREE, "nothing reached shared memory: each thread must load its element(s) of x into s[tid] "
                    "(guarded, so that threads past the end load 0).")
        if per_thread == 2 and got[bad] == first_half and expected[bad] != first_half:
            return (TREE, "that is the sum of the block's first blockDim.x elements only: each thread must also "
                    "add x[i + cuda.blockDim.x] (when it exists).")
        if hint is not None:
            return (TREE, hint)
        if got[bad] == x[first]:
            return (TREE, "a block's sum equals its first element: the tree never added anything to s[0]. The loop "
                    "runs `stride` from cuda.blockDim.x // 2 down to 1; threads with tid < stride add "
                    "s[tid + stride] into s[tid]; cuda.syncthreads() after every level, outside the `if`.")
        return (TREE, "check the tree: stride halves from cuda.blockDim.x // 2 to 1, only threads tid < stride "
                "add, and every level ends with cuda.syncthreads() outside the `if`.")
    return explain


def block_sum_exercise(per_thread: int = 1, what: str = "your kernel", hint: str | None = None) -> h.Exercise:
    """A block-sum kernel ``kernel(x, partial)`` as declared for the harness: block b writes the sum of
    ``x[b*T*p : (b+1)*T*p]`` (``T`` threads, ``p = per_thread``) into ``partial[b]``, exactly."""
    return h.Exercise(
        name=what,
        args=lambda c: (integer_valued(c.n, c.rng),
                        h.Out(h.grid_for(c.n, c.threads, per_thread), np.float32)),
        reference=lambda case, x: _block_sums(case, x, per_thread),
        configs=[{"threads": t} for t in THREADS_SIM], configs_gpu=[{"threads": t} for t in THREADS_GPU],
        per_thread=per_thread, sizes=lambda config: SIZES_SIM, sizes_gpu=SIZES_GPU, dtype=np.float32, rtol=0,
        atol=0, explain=_reduction_explain(per_thread, hint), seed=6)


def check_block_reduction(kernel, *, per_thread: int = 1, what: str = "your kernel", hint: str | None = None) -> None:
    """Check a partial-sum kernel ``kernel(x, partial)``: each block writes the sum of its elements.

    ``hint`` replaces the advice about the shared-memory tree when a block's sum is simply wrong.

    Raises:
        CheckFailed: the bug's class, the size and block size where a block's sum is wrong, what to change.
    """
    h.check(block_sum_exercise(per_thread, what, hint), kernel)


def check_sequential_reduction(kernel) -> None:
    """Exercise 1: the sequential-addressing tree (one element per thread, ``partial[b]`` per block)."""
    check_block_reduction(kernel, per_thread=1, what="your sequential-addressing kernel")


def check_first_add_any_n(kernel) -> None:
    """Exercise 2: first add during load, correct for any n (each block covers ``2 * blockDim`` elements)."""
    check_block_reduction(kernel, per_thread=2, what="your first-add kernel")


def shuffle_calls(kernel) -> list[str]:
    """The warp-shuffle intrinsics the kernel's source calls (comments and strings do not count)."""
    func = getattr(kernel, "py_func", kernel)
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(func)))
    except (OSError, TypeError, SyntaxError):
        return []
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            f = node.func
            name = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")
            if name in SHUFFLES:
                found.append(name)
    return found


def check_warp_shuffle_reduction(kernel) -> None:
    """Exercise 3: a block sum with warp shuffles (``kernel(x, partial)``, one element per thread). GPU only.

    On a GPU the harness runs the kernel on every size and block size and it must match NumPy exactly.
    Under the simulator (which has no warp intrinsics) it cannot run: the checker only verifies that
    the kernel calls a shuffle, and says clearly that nothing was executed.
    """
    h.require_kernel(kernel, "your kernel")
    calls = shuffle_calls(kernel)
    if not calls:
        raise h.failure(h.NOT_WRITTEN_YET, "your kernel does not call a warp shuffle yet: fill in the two warp sums "
                        "with `v += cuda.shfl_down_sync(0xFFFFFFFF, v, offset)` for offset = 16, 8, 4, 2, 1.")
    if backend.is_simulator():
        print("GPU only: your kernel calls cuda." + calls[0] + ", and Numba's CUDA simulator has no warp "
              "shuffles, so the kernel was NOT run and NOT checked here. Open this lab on a GPU (in Colab: "
              "Runtime > Change runtime type > GPU) and run this cell again to check it.")
        return
    check_block_reduction(kernel, per_thread=1, what="your warp-shuffle kernel",
                          hint="Check both folds: `v += cuda.shfl_down_sync(0xFFFFFFFF, v, offset)` for offset = "
                               "16, 8, 4, 2 and 1 (stop after 1, not before), once in every warp and once more in "
                               "warp 0 over warp_sums; lane 0 holds the result.")


# ------------------------------------------------------------------------------------------ histogram


def _histogram_args(case: h.Case) -> tuple:
    if case["data"] == "one-bin":
        values = np.full(case.n, NBINS - 1, dtype=np.int32)
    else:
        values = case.rng.integers(0, NBINS, size=case.n).astype(np.int32)
    return (values, h.Out(NBINS, np.int32, initial=np.zeros(NBINS, np.int32)))


def _histogram_explain(case: h.Case, index: int, got, expected, inputs) -> tuple[str, str]:
    n, total = case.size, int(got.sum())
    if (got < 0).any() or (got > n).any():
        return (NOT_ZEROED, "some bins hold values no count can have: the shared histogram was used without being "
                "zeroed (shared memory is not initialised, and a block may start with another block's leftovers). "
                "Zero bins tid, tid + blockDim.x, ... and put a barrier after the zeroing.")
    if total == 0:
        return (h.NEVER_WRITTEN, "nothing reached `counts`: after the block's shared histogram is complete (a "
                "barrier), add each bin into counts with cuda.atomic.add(counts, b, s_counts[b]).")
    if total > n:
        return (COUNTED_TWICE, f"{total} counts for {n} elements: some were counted more than once. The "
                "grid-stride loop steps by the whole grid, i += cuda.gridsize(1) (not the block's size), and each "
                "block zeroes its shared histogram before counting.")
    if total < n:
        return ("Grid-stride loop", f"only {total} of {n} elements were counted: each thread must loop over i, "
                "i + cuda.gridsize(1), ... (the grid is smaller than the data), and every block must add all its "
                "bins (loop b = tid, tid + blockDim.x, ... while b < NBINS).")
    return (h.MISSING_BARRIER, "the total is right but the bins are not: a plain `+=` from many threads loses "
            "updates; use cuda.atomic.add on the shared bins, with a barrier between zeroing, counting and the "
            "final addition into counts.")


def histogram_exercise(bins: int = NBINS) -> h.Exercise:
    """Exercise 4 as declared for the harness: ``kernel(values, counts)`` on a grid about a quarter of the data."""
    assert bins == NBINS, "the histogram exercise has NBINS bins"
    configs = [{"threads": 32, "data": d} for d in ("uniform", "one-bin")]
    return h.Exercise(
        name="your histogram kernel", args=_histogram_args,
        reference=lambda case, values, counts0: counts0 + np.bincount(values, minlength=NBINS).astype(np.int32),
        configs=configs, configs_gpu=[{"threads": 256, "data": d} for d in ("uniform", "one-bin")],
        per_thread=HISTOGRAM_PER_THREAD, sizes=lambda config: (2, 5 * 32 * HISTOGRAM_PER_THREAD + 7),
        sizes_gpu=(2**20 + 7,), explain=_histogram_explain, seed=16)


def plain_updates(kernel, array: str) -> list[int]:
    """Lines of ``kernel`` that store into the argument ``array`` without an atomic (``array[i] += v``, ``= v``)."""
    try:
        tree = ast.parse(textwrap.dedent(source_of(kernel)))
    except (OSError, TypeError, SyntaxError):
        return []
    lines = []
    for node in ast.walk(tree):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(
            node, ast.AugAssign) else []
        if any(isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name) and t.value.id == array
               for t in targets):
            lines.append(node.lineno)
    return lines


def check_histogram(kernel, *, bins: int = NBINS) -> None:
    """Exercise 4: ``kernel(values, counts)`` adds a histogram of ``values`` (ints in [0, bins)) into ``counts``.

    ``counts`` starts at zero. The grid is deliberately smaller than the data (a grid-stride loop must
    cover every element) and has several blocks (each block's shared histogram must start at zero).
    Tried on uniform and on one-bin data (every thread hitting the same counter: atomics are the only
    correct way). The additions into ``counts`` must be atomic: several blocks add into one bin at once
    on a GPU, which the simulator (one block after another) never shows, so a plain store into
    ``counts`` is refused from the source.

    Raises:
        CheckFailed: the bug's class, the size and data where the counts differ, and the likely cause.
    """
    h.require_kernel(kernel, "your histogram kernel")
    params = list(inspect.signature(kernel.py_func).parameters) if hasattr(kernel, "py_func") else []
    if len(params) == 2 and plain_updates(kernel, params[1]):
        raise h.failure(RACE_ON_FINAL_ADD, f"your histogram kernel stores into {params[1]} without an atomic "
                        f"(line {plain_updates(kernel, params[1])[0]} of the kernel): blocks add into the same bins at "
                        "the same time on a GPU, and a plain `+=` loses updates (the simulator runs one block after "
                        f"another, so no run here shows it). Write cuda.atomic.add({params[1]}, b, s_counts[b]).")
    h.check(histogram_exercise(bins), kernel)


# ------------------------------------------------------------------------------------------- measured exercise

#: Block sizes the measured exercise accepts (powers of two: the tree halves the block).
TUNED_THREADS: tuple[int, ...] = (32, 64, 128, 256, 512, 1024)
TUNED_N = 2**26


def _first_add_reference(threads: int) -> str:
    ref = load_reference("ch06_reduction_sweep")
    copies = load_reference("ch07_copy_variants")
    rows = ref.table[ref.table["variant"] == "first_add"]
    row = timed.nearest_row(rows, "threads", threads)
    ceiling = float(copies.table["gbps"].max())
    return timed.reference_text(
        ref, f"the chapter's first-add reduction at {int(row.threads)} threads per block: {row.gbps:,.0f} GB/s, "
             f"{row.gbps / ceiling:.2f} of the copy ceiling ({ceiling:,.0f} GB/s, same run)")


FIRST_ADD_TUNED = timed.MeasuredExercise(
    name="reduce_first_add at your block size", target=timed.target_for("6", 0.25),
    measures=f"your reduce_first_add's pass over {TUNED_N:,} floats (one partial sum per block) at your block size, "
             "in GB/s (4 bytes per element read)",
    yardstick="the copy ceiling (a device-to-device copy)", reference=_first_add_reference)


def _race_first_add(kernel, threads: int) -> tuple:
    x_d = cuda.to_device(np.ones(TUNED_N, dtype=np.float32))
    blocks = blocks_for(TUNED_N, 2 * threads)
    partial = cuda.device_array(blocks, dtype=np.float32)
    student = benchmark(lambda: kernel[blocks, threads](x_d, partial), nbytes=4 * TUNED_N, label="reduce_first_add")
    return student, timed.time_copy_of(8 * TUNED_N)


def check_first_add_threads(kernel, choose_threads) -> timed.Verdict:
    """Measured exercise: ``choose_threads()`` picks the block size of ``reduce_first_add`` (exercise 2, checked
    first); on a GPU its pass must read at ``FIRST_ADD_TUNED.target`` of the copy ceiling measured in the same run.

    Raises:
        CheckFailed: the kernel is wrong (the harness's class), the choice is not allowed, or too slow.
    """
    threads = timed.choose(choose_threads, "choose_threads", TUNED_THREADS)
    return timed.check(FIRST_ADD_TUNED, threads, correct=lambda: check_first_add_any_n(kernel),
                          race=lambda: _race_first_add(kernel, threads))


# ------------------------------------------------------------------------------ predict, then measure (issue 26)

#: (n, itemsize, copy_gbs) cases of :func:`check_reduction_bound`: arguments, not a GPU's figures.
BOUND_CASES: tuple[tuple[int, int, float], ...] = ((10**6, 8, 250.0), (2**26, 4, 3000.0), (12345, 4, 3000.0))
#: The reference variants shown beside the prediction (``ch06_reduction_sweep``), fastest block size of each.
BOUND_VARIANTS: tuple[str, ...] = ("interleaved", "first_add", "best", "cupy_sum")


def _bound_hint(got: float, n: int, itemsize: int, gbs: float) -> str:
    want = n * itemsize / (gbs * 1e9) * 1e3
    if np.isclose(got, 2 * want, rtol=1e-6):
        return "a reduction only READS its input: the few partial sums it writes are negligible"
    if np.isclose(got, want / itemsize, rtol=1e-6):
        return f"count bytes, not elements: {itemsize} bytes per element"
    if np.isclose(got, want * 1e3, rtol=1e-6) or np.isclose(got, want / 1e3, rtol=1e-6):
        return "bytes / (GB/s * 1e9) is seconds: times 1000 for milliseconds"
    return f"bytes moved = n * itemsize (read once); time = bytes / ({gbs:g}e9 B/s)"


def check_reduction_bound(predict_reduction_ms: Any) -> None:
    """Predict, then measure: ``predict_reduction_ms(n, itemsize, copy_gbs)`` returns the least time in ms of a sum
    of ``n`` elements of ``itemsize`` bytes (each read once, the partial sums negligible) at the copy ceiling
    ``copy_gbs`` (GB/s, 10^9 bytes per second).

    Raises:
        CheckFailed: the function raises, returns something that is not a number, or the wrong number
            (:data:`labhelpers.exercises.answers.WRONG_ANSWER`, with what the number looks like).
    """
    answers.check_formula(predict_reduction_ms, "predict_reduction_ms",
                          "predict_reduction_ms(n, itemsize, copy_gbs)",
                          BOUND_CASES,
                          lambda n, itemsize, gbs: n * itemsize / (gbs * 1e9) * 1e3,
                          shown=lambda got, want: f"{got:.6g} ms, the bound is {want:.6g} ms",
                          hint=_bound_hint)
    print(f"Correct: your bound equals bytes read over the copy ceiling on all {len(BOUND_CASES)} cases.")


def show_reduction_bound(predict_reduction_ms: Any) -> pd.DataFrame:
    """Your bound (checked first by :func:`check_reduction_bound`) for a sum of :data:`TUNED_N` float32 beside the
    chapter's measured reductions (reference ``ch06_reduction_sweep``, each at its fastest block size), at the
    reference copy ceiling (``ch07_copy_variants``); on a GPU the copy ceiling is timed now instead.

    Raises:
        CheckFailed: the prediction is wrong (as :func:`check_reduction_bound`).
    """
    check_reduction_bound(predict_reduction_ms)
    ref = load_reference("ch06_reduction_sweep")
    copy_gbs = float(load_reference("ch07_copy_variants").table["gbps"].max())
    if timed.can_time():
        copy_gbs = timed.time_copy_of(8 * TUNED_N).gbps
        print(f"Copy ceiling measured now: {copy_gbs:,.0f} GB/s; the reductions are the chapter's ({ref.gpu}).")
    else:
        print(timed.reference_text(ref, f"Measured (copy ceiling {copy_gbs:,.0f} GB/s)"))
    bound = answers.number(answers.call(predict_reduction_ms, "predict_reduction_ms", TUNED_N, 4, copy_gbs),
                           "predict_reduction_ms")
    rows = []
    for variant in BOUND_VARIANTS:
        t = ref.table[ref.table["variant"] == variant]
        ms = float(t["median_ms"].astype(float).min())
        rows.append({"reduction": variant, "your bound (ms)": round(bound, 4), "measured (ms)": round(ms, 4),
                     "measured / bound": round(ms / bound, 2)})
    return pd.DataFrame(rows)
