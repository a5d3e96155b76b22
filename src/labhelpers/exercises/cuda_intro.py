"""Checkers for lab 1, "CUDA in Python". Each takes the student's kernel (or function) first.

The kernel checkers launch the kernel themselves, with the usual ceiling-division grid, on
the awkward sizes of :func:`labhelpers.sizes.awkward_sizes`. Every array the kernel sees is
a view of a larger buffer whose padding the checker watches: a thread that writes past the
end of ``out`` (a missing or wrong bounds check) is caught the same way on a GPU (the write
lands in the padding) and under the simulator (which raises IndexError), and never
corrupts memory the checker does not own.

* :func:`check_fill_index`: ``fill_index(out)`` writes ``out[i] = i``.
* :func:`check_vector_add`: ``vector_add(x, y, out)`` writes ``out[i] = x[i] + y[i]``.
* :func:`check_scale_2d`: ``scale_2d(a, alpha, out)`` writes ``out[row, col] = alpha * a[row, col]``
  on a 2D grid whose x dimension runs along columns.
* :func:`check_launch_config`: ``launch_config(n, threads)`` returns ``(blocks, idle_threads, warps)``.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from .. import backend, validate
from ..checkers import check_function, launch_student_kernel, require_kernel
from ..errors import CheckFailed
from ..launch import blocks_for
from ..models.launch_calc import launch_2d, summarize_launch

#: Threads per block the 1D checkers launch with: small enough that every size has idle threads.
THREADS_1D = 64
#: Block the 2D checker launches with, as (x along columns, y along rows): deliberately not square.
BLOCK_2D = (16, 8)
#: Matrix shapes the 2D checker tries (rows, cols): thin, tall, and sizes no block divides.
SHAPES_2D_SIM: tuple[tuple[int, int], ...] = ((1, 1), (1, 37), (37, 1), (17, 31), (40, 45))
SHAPES_2D_GPU: tuple[tuple[int, int], ...] = SHAPES_2D_SIM + ((1001, 1537),)
#: Threads per block :func:`check_launch_config` asks about (100 and 1000 are no multiple of 32).
THREADS_TRIED: tuple[int, ...] = (1, 32, 64, 100, 128, 256, 1000, 1024)



def _padded_1d(values: np.ndarray, pad: int, fill: float):
    """A device buffer of ``values`` followed by ``pad`` elements of ``fill``, and the view of its first part."""
    from numba import cuda

    buf = np.full(values.size + pad, fill, dtype=values.dtype)
    buf[:values.size] = values
    buf_d = cuda.to_device(buf)
    return buf_d, buf_d[:values.size]


def _run_1d(kernel: Any, name: str, inputs: Sequence[np.ndarray], n: int, out_dtype, threads: int,
            scalars: Sequence[Any] = ()) -> np.ndarray:
    """Launch ``kernel(*inputs, *scalars, out)`` for ``n`` elements; check the padding after ``out``; return out."""
    blocks = blocks_for(n, threads)
    pad = threads  # more than the idle threads of the last block
    views = [_padded_1d(np.asarray(a), pad, 0)[1] for a in inputs]
    out_buf, out = _padded_1d(np.full(n, np.nan, dtype=out_dtype), pad, np.nan)
    launch_student_kernel(kernel, blocks, threads, [*views, *scalars, out], name)
    full = out_buf.copy_to_host()
    stray = int(np.count_nonzero(~np.isnan(full[n:])))
    if stray:
        raise CheckFailed(
            f"{name} wrote past the end of out for n={n}: {stray} idle thread(s) with index >= n wrote into the "
            "memory after the array (here the checker's padding; in a real program someone else's data). Guard "
            "the write with a bounds check such as `if i < out.size:`.")
    return full[:n]


def check_fill_index(kernel: Any, *, threads: int = THREADS_1D) -> None:
    """Check ``fill_index(out)``: every thread writes its global index, ``out[i] = i``, and idle threads do nothing.

    Raises:
        CheckFailed: with the size that failed and what to change.
    """
    require_kernel(kernel, "fill_index")
    threads = validate.threads_per_block(threads)
    check_function(
        lambda n: _run_1d(kernel, "fill_index", [], n, np.float64, threads),
        lambda n: np.arange(n, dtype=np.float64),
        lambda n, rng: (n,),
        what="fill_index",
    )


def check_vector_add(kernel: Any, *, threads: int = THREADS_1D) -> None:
    """Check ``vector_add(x, y, out)``: ``out[i] = x[i] + y[i]`` for any n, with a bounds check.

    Raises:
        CheckFailed: with the size that failed and what to change.
    """
    require_kernel(kernel, "vector_add")
    threads = validate.threads_per_block(threads)

    def make_inputs(n: int, rng: np.random.Generator) -> tuple:
        return (rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32))

    check_function(
        lambda x, y: _run_1d(kernel, "vector_add", [x, y], x.size, np.float32, threads),
        lambda x, y: x + y,
        make_inputs,
        what="vector_add",
    )


def _run_2d(kernel: Any, a: np.ndarray, alpha: np.float32, block: tuple[int, int]) -> np.ndarray:
    """Launch ``kernel(a, alpha, out)`` over ``a``'s shape with padded 2D buffers; check the padding; return out."""
    from numba import cuda

    rows, cols = a.shape
    grid, block = launch_2d((rows, cols), block)
    bx, by = block
    a_buf = np.zeros((rows + by, cols + bx), dtype=np.float32)
    a_buf[:rows, :cols] = a
    a_view = cuda.to_device(a_buf)[:rows, :cols]
    out_buf = cuda.to_device(np.full((rows + by, cols + bx), np.nan, dtype=np.float32))
    out = out_buf[:rows, :cols]
    launch_student_kernel(kernel, grid, block, [a_view, alpha, out], "scale_2d")
    full = out_buf.copy_to_host()
    stray = int(np.count_nonzero(~np.isnan(full))) - int(np.count_nonzero(~np.isnan(full[:rows, :cols])))
    if stray:
        raise CheckFailed(
            f"scale_2d wrote outside a {rows} x {cols} matrix: {stray} thread(s) past the last row or column wrote "
            "(into the checker's padding). Guard the write with `if row < out.shape[0] and col < out.shape[1]:`.")
    return full[:rows, :cols]


def check_scale_2d(kernel: Any, *, block: tuple[int, int] = BLOCK_2D,
                   shapes: Sequence[tuple[int, int]] | None = None) -> None:
    """Check ``scale_2d(a, alpha, out)``: ``out[row, col] = alpha * a[row, col]`` on a 2D grid.

    The checker launches ``grid = (ceil(cols / bx), ceil(rows / by))`` blocks of ``block = (bx, by)``
    threads: x runs along columns, y along rows, so the kernel should start with
    ``col, row = cuda.grid(2)``.

    Raises:
        CheckFailed: with the matrix shape that failed and what to change.
    """
    require_kernel(kernel, "scale_2d")
    block = validate.block_shape(block)
    shapes = tuple(shapes) if shapes is not None else (SHAPES_2D_SIM if backend.is_simulator() else SHAPES_2D_GPU)
    alpha = np.float32(-1.5)
    for rows, cols in shapes:
        def make_inputs(_n: int, rng: np.random.Generator, rows: int = rows, cols: int = cols) -> tuple:
            return (rng.standard_normal((rows, cols)).astype(np.float32), alpha)

        try:
            check_function(
                lambda a, s: _run_2d(kernel, a, s, block),
                lambda a, s: s * a,
                make_inputs,
                sizes=[rows * cols],
                what=f"scale_2d on a {rows} x {cols} matrix",
                quiet=True,
            )
        except CheckFailed as exc:
            raise CheckFailed(
                f"{exc} (The checker launches blocks of {block} threads with x along columns and y along rows: "
                "`col, row = cuda.grid(2)`, then check both against out.shape.)") from None
    print(f"Correct: scale_2d matches NumPy on all {len(shapes)} matrix shapes tried (thin, tall and odd ones).")


def check_launch_config(func: Callable[[int, int], Any]) -> None:
    """Check ``launch_config(n, threads) -> (blocks, idle_threads, warps)`` and that it rejects impossible blocks.

    ``warps`` counts every warp launched: ``blocks * ceil(threads / 32)``. Threads per block
    outside 1..1024 must raise ``ValueError`` (``lh.LaunchConfigError`` is one).

    Raises:
        CheckFailed: with the case that failed and what to change.
    """
    def student(n: int) -> np.ndarray:
        got = []
        for threads in THREADS_TRIED:
            s = summarize_launch(n, threads)
            expected = (s.blocks, s.idle_threads, s.warps)
            result = func(n, threads)
            if result is None:
                raise CheckFailed(f"launch_config({n}, {threads}) returned None: return (blocks, idle_threads, warps).")
            try:
                result = tuple(int(v) for v in result)
            except (TypeError, ValueError):
                raise CheckFailed(f"launch_config({n}, {threads}) returned {result!r}: return three whole numbers "
                                  "(blocks, idle_threads, warps).") from None
            if len(result) != 3:
                raise CheckFailed(f"launch_config({n}, {threads}) returned {len(result)} values: return three, "
                                  "(blocks, idle_threads, warps).")
            if result != expected:
                wrong = [name for name, g, e in zip(("blocks", "idle_threads", "warps"), result, expected) if g != e]
                hint = {
                    "blocks": "blocks is the ceiling of n / threads (so blocks * threads >= n)",
                    "idle_threads": "idle threads are the threads launched beyond n: blocks * threads - n",
                    "warps": "a block of t threads takes ceil(t / 32) warps (a partly filled warp counts)",
                }[wrong[0]]
                raise CheckFailed(f"launch_config({n}, {threads}) returned {result}, expected {expected}: "
                                  f"{', '.join(wrong)} wrong; {hint}.")
            got.append(result)
        return np.array(got)

    def reference(n: int) -> np.ndarray:
        rows = []
        for threads in THREADS_TRIED:
            s = summarize_launch(n, threads)
            rows.append((s.blocks, s.idle_threads, s.warps))
        return np.array(rows)

    check_function(student, reference, lambda n, rng: (n,), what="launch_config", quiet=True)
    for threads in (0, 1025, 2048):
        try:
            func(1000, threads)
        except ValueError:
            continue
        except Exception as exc:
            raise CheckFailed(f"launch_config(1000, {threads}) raised {type(exc).__name__}; raise ValueError "
                              "(or lh.LaunchConfigError) for threads per block outside 1..1024.") from None
        raise CheckFailed(f"launch_config(1000, {threads}) returned instead of raising: no GPU can launch a block "
                          "of that many threads. Raise ValueError (or lh.LaunchConfigError) with a message.")
    print(f"Correct: launch_config matches for {len(THREADS_TRIED)} block sizes on every size tried, and rejects "
          "impossible blocks.")
