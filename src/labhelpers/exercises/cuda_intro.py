"""Checkers for lab 1, "CUDA in Python". Each takes the student's kernel (or function) first.

The kernel exercises are declared for the exercise harness (:mod:`labhelpers.exercises.harness`), which
launches them with the usual ceiling-division grid on sizes with a partial last block, guards every
output with a band of sentinels (a write past the end is caught the same way on a GPU and under the
simulator), refuses float64 arithmetic in the float32 exercises and names the bug's class first.

* :func:`check_fill_index`: ``fill_index(out)`` writes ``out[i] = i``.
* :func:`check_vector_add`: ``vector_add(x, y, out)`` writes ``out[i] = x[i] + y[i]``.
* :func:`check_scale_2d`: ``scale_2d(a, alpha, out)`` writes ``out[row, col] = alpha * a[row, col]``
  on a 2D grid whose x dimension runs along columns.
* :func:`check_launch_config`: ``launch_config(n, threads)`` returns ``(blocks, idle_threads, warps)``.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
from numba import cuda

from .. import validate
from ..launch import blocks_for
from ..refdata import load_reference
from ..timing import benchmark
from ..models.launch_summary import summarize_launch
from . import answers
from . import harness as h
from . import timed

#: Threads per block of the 1D exercises (a GPU also tries :data:`THREADS_1D_GPU`).
THREADS_1D = 64
THREADS_1D_GPU = 256
#: Block of the 2D exercise, as (x along columns, y along rows): deliberately not square.
BLOCK_2D = (16, 8)
#: Matrix shapes (rows, cols) tried besides the harness's own (one element, one row, one column, partial blocks).
SHAPES_2D_SIM: tuple[tuple[int, int], ...] = ((17, 31),)
SHAPES_2D_GPU: tuple[tuple[int, int], ...] = ((1001, 1537),)
#: Threads per block :func:`check_launch_config` asks about (100 and 1000 are no multiple of 32).
THREADS_TRIED: tuple[int, ...] = (1, 32, 64, 100, 128, 256, 1000, 1024)
#: Sizes :func:`check_launch_config` asks about: multiples of the blocks (the ceiling's edge) and one more.
SIZES_TRIED: tuple[int, ...] = (1, 31, 32, 33, 100, 256, 257, 1000, 1024, 1025, 4096, 10**6 + 1)
#: Message classes of this lab.
LOCAL_INDEX = "Local index instead of global"
GRID_TOO_SMALL = "Grid not covering n"


def _gpu_configs(threads: int) -> list[dict]:
    return [] if threads == THREADS_1D_GPU else [{"threads": THREADS_1D_GPU}]


def _local_index(case: h.Case, index: int, got, expected, inputs) -> tuple[str, str] | None:
    """Only the first block's elements written (every block wrote over them): threadIdx.x used as the index."""
    t = case.threads
    if case.size <= t or not np.isnan(got[t:]).all() or np.isnan(got[:t]).any():
        return None
    return (LOCAL_INDEX, "only the first block's elements were written (each block wrote over them): the "
            "element of a thread is its GLOBAL index, i = cuda.grid(1) = blockIdx.x * blockDim.x + threadIdx.x, "
            "not threadIdx.x.")


def fill_index_exercise(threads: int = THREADS_1D) -> h.Exercise:
    """``fill_index(out)`` as declared for the harness (a float64 output: no float32 rule)."""
    return h.Exercise(
        name="fill_index", args=lambda c: (h.Out(c.n, np.float64),),
        reference=lambda case: np.arange(case.n, dtype=np.float64),
        configs=[{"threads": threads}], configs_gpu=_gpu_configs(threads), sizes=lambda config: (257,),
        sizes_gpu=(100_003,), explain=_local_index, seed=1)


def vector_add_exercise(threads: int = THREADS_1D) -> h.Exercise:
    """``vector_add(x, y, out)`` as declared for the harness (float32)."""
    return h.Exercise(
        name="vector_add", args=lambda c: (c.floats(), c.floats(), h.Out(c.n, np.float32)),
        reference=lambda case, x, y: x + y, configs=[{"threads": threads}], configs_gpu=_gpu_configs(threads),
        sizes=lambda config: (257,), sizes_gpu=(100_003,), dtype=np.float32, rtol=1e-6, atol=1e-6,
        explain=_local_index, seed=2)


def scale_2d_exercise(block: tuple[int, int] = BLOCK_2D) -> h.Exercise:
    """``scale_2d(a, alpha, out)`` as declared for the harness (float32, x along the columns)."""
    return h.Exercise(
        name="scale_2d", args=lambda c: (c.floats(), np.float32(-1.5), h.Out(c.n, np.float32)),
        reference=lambda case, a, alpha: alpha * a, configs=[{"threads": block}],
        configs_gpu=[] if block == (32, 8) else [{"threads": (32, 8)}], sizes=lambda config: SHAPES_2D_SIM,
        sizes_gpu=SHAPES_2D_GPU, dtype=np.float32, rtol=1e-6, atol=1e-6, seed=3)


def check_fill_index(kernel: Any, *, threads: int = THREADS_1D) -> None:
    """Check ``fill_index(out)``: every thread writes its global index, ``out[i] = i``, and idle threads do nothing.

    Raises:
        CheckFailed: with the bug's class, the size that failed and what to change.
        LaunchConfigError: ``threads`` is no possible block.
    """
    h.check(fill_index_exercise(validate.threads_per_block(threads)), kernel)


def check_vector_add(kernel: Any, *, threads: int = THREADS_1D) -> None:
    """Check ``vector_add(x, y, out)``: ``out[i] = x[i] + y[i]`` for any n, with a bounds check, in float32.

    Raises:
        CheckFailed: with the bug's class, the size that failed and what to change.
        LaunchConfigError: ``threads`` is no possible block.
    """
    h.check(vector_add_exercise(validate.threads_per_block(threads)), kernel)


def check_scale_2d(kernel: Any, *, block: tuple[int, int] = BLOCK_2D) -> None:
    """Check ``scale_2d(a, alpha, out)``: ``out[row, col] = alpha * a[row, col]`` on a 2D grid.

    The checker launches ``grid = (ceil(cols / bx), ceil(rows / by))`` blocks of ``block = (bx, by)``
    threads: x runs along columns, y along rows, so the kernel starts with ``col, row = cuda.grid(2)``.

    Raises:
        CheckFailed: with the bug's class, the matrix shape that failed and what to change.
        LaunchConfigError: ``block`` is no possible block.
    """
    h.check(scale_2d_exercise(tuple(validate.block_shape(block))), kernel)


def _launch_hint(field: str, result: tuple[int, int, int], expected: tuple[int, int, int], n: int,
                 threads: int) -> tuple[str, str]:
    blocks = result[0]
    if field == "blocks":
        if blocks * threads < n:
            return (GRID_TOO_SMALL, f"{blocks} blocks of {threads} threads are {blocks * threads} threads for {n} "
                    "elements: blocks is the CEILING of n / threads, (n + threads - 1) // threads, not n // threads.")
        return (h.WRONG_VALUES, "blocks is the smallest count with blocks * threads >= n: (n + threads - 1) // "
                "threads (n // threads + 1 launches a whole block too many when threads divides n).")
    if field == "idle_threads":
        return (h.WRONG_VALUES, "idle threads are the threads launched beyond n: blocks * threads - n.")
    return ("Partial warp", "a block of t threads takes ceil(t / 32) warps (a partly filled warp counts as one): "
            "warps = blocks * ((threads + 31) // 32).")


def check_launch_config(func: Callable[[int, int], Any]) -> None:
    """Check ``launch_config(n, threads) -> (blocks, idle_threads, warps)`` and that it rejects impossible blocks.

    ``warps`` counts every warp launched: ``blocks * ceil(threads / 32)``. Threads per block outside
    1..1024 must raise ``ValueError`` (``lh.LaunchConfigError`` is one). Tried on sizes at and around
    multiples of the block (where floor and ceiling division differ) and blocks that are no multiple of 32.

    Raises:
        CheckFailed: with the case that failed and what to change (a result of the wrong type first).
    """
    for n in SIZES_TRIED:
        for threads in THREADS_TRIED:
            s = summarize_launch(n, threads)
            expected = (s.blocks, s.idle_threads, s.warps)
            text = f"launch_config({n}, {threads})"
            value = answers.call(func, "launch_config", n, threads)
            if not isinstance(value, (tuple, list)):
                raise answers.wrong_type(value, text, "three whole numbers, (blocks, idle_threads, warps)")
            if len(value) != 3:
                raise h.failure(answers.WRONG_TYPE, f"{text} returned {len(value)} values: return three, "
                                                    "(blocks, idle_threads, warps).")
            result = tuple(answers.whole_number(v, f"{text} (in its result)") for v in value)
            if result != expected:
                names = ("blocks", "idle_threads", "warps")
                wrong = [name for name, g, e in zip(names, result, expected) if g != e]
                cls, hint = _launch_hint(wrong[0], result, expected, n, threads)
                raise h.failure(cls, f"{text} returned {result}, expected {expected}: {', '.join(wrong)} wrong; "
                                     f"{hint}")
    for threads in (0, 1025, 2048):
        try:
            func(1000, threads)
        except ValueError:
            continue
        except Exception as exc:  # noqa: BLE001  (the wrong kind of error: say which)
            raise h.failure("No error for an impossible block",
                            f"launch_config(1000, {threads}) raised {type(exc).__name__}; raise ValueError (or "
                            "lh.LaunchConfigError) for threads per block outside 1..1024.") from None
        raise h.failure("No error for an impossible block",
                        f"launch_config(1000, {threads}) returned instead of raising: no GPU can launch a block of "
                        "that many threads. Raise ValueError (or lh.LaunchConfigError) with a message.")
    print(f"Correct: launch_config matches for {len(THREADS_TRIED)} block sizes on {len(SIZES_TRIED)} sizes "
          "(multiples of the block included), and rejects impossible blocks.")


# ------------------------------------------------------------------------------------------- measured exercise

#: Block sizes the measured exercise accepts (whole warps).
TUNED_THREADS: tuple[int, ...] = tuple(range(32, 1025, 32))
#: Elements vector_add is timed on (GPU): 2^26 floats, 768 MiB moved per call.
TUNED_N = 2**26


def _threads_reference(threads: int) -> str:
    sweep = load_reference("ch04_block_size_sweep")
    copies = load_reference("ch07_copy_variants")
    rows = sweep.table[sweep.table["ilp"] == 1]
    row = timed.nearest_row(rows, "threads", threads)
    ceiling = float(copies.table["gbps"].max())
    return timed.reference_text(
        sweep, f"chapter 4's scale kernel (one read, one write per element, like vector_add) at {int(row.threads)} "
               f"threads per block: {row.gbps:,.0f} GB/s, {row.gbps / ceiling:.2f} of the copy ceiling "
               f"({ceiling:,.0f} GB/s, same run)")


VECTOR_ADD_TUNED = timed.MeasuredExercise(
    name="vector_add at your block size", target=timed.target_for("1", 0.7),
    measures=f"your vector_add on {TUNED_N:,} floats at your block size, in GB/s (12 bytes per element)",
    yardstick="the copy ceiling (a device-to-device copy)", reference=_threads_reference)


def _race_vector_add(kernel: Any, threads: int) -> tuple:
    x = cuda.to_device(np.ones(TUNED_N, np.float32))
    y = cuda.to_device(np.ones(TUNED_N, np.float32))
    out = cuda.device_array(TUNED_N, np.float32)
    blocks = blocks_for(TUNED_N, threads)
    student = benchmark(lambda: kernel[blocks, threads](x, y, out), nbytes=12 * TUNED_N, label="vector_add")
    return student, timed.time_copy_of(12 * TUNED_N)


def check_vector_add_threads(kernel: Any, choose_threads: Callable[[], Any]) -> timed.Verdict:
    """Measured exercise: ``choose_threads()`` returns a block size for ``vector_add``; it must be correct at that
    size (the harness) and, on a GPU, reach its target (``VECTOR_ADD_TUNED.target``) of the copy ceiling measured in the same run.

    Raises:
        CheckFailed: the kernel is wrong (the harness's class), the choice is not a whole number of warps
            (``Not an allowed choice``), or the GPU says it is too slow (``Below target``).
    """
    threads = timed.choose(choose_threads, "choose_threads", TUNED_THREADS)
    return timed.check(VECTOR_ADD_TUNED, threads, correct=lambda: check_vector_add(kernel, threads=threads),
                          race=lambda: _race_vector_add(kernel, threads))


__all__ = ["BLOCK_2D", "THREADS_1D", "TUNED_THREADS", "VECTOR_ADD_TUNED", "check_fill_index", "check_launch_config",
           "check_scale_2d", "check_vector_add", "check_vector_add_threads", "fill_index_exercise",
           "scale_2d_exercise", "vector_add_exercise"]
