"""Checkers for lab 5, "Matrix multiplication". Each takes the student's kernel (or function) first.

Every kernel exercise is declared for the exercise harness (:mod:`labhelpers.exercises.harness`): it
launches ``kernel(A, B, C)`` with x along the columns of ``C`` and y along its rows on shapes with partial
blocks in both directions (one element, one row, one column, sizes no tile divides), guards every
matrix with a band (a read past ``A`` or ``B`` gets NaN, a write past ``C`` is seen on both backends),
refuses float64 arithmetic, and runs the race detector on a product of two phases of the k loop with a
partial tile at each edge: a missing barrier is reported as the race it is, a barrier inside a branch
(or after a ``return``) as such. What is specific to matrix products lives here: the k of each shape,
the row/column swap diagnosis (:func:`swap_hint`), and exercise 4's message, which shows the race
WITHOUT its kind (naming the hazard is exercise 5).

* :func:`check_naive`: ``kernel(A, B, C)``, one thread per element of ``C``, any shapes.
* :func:`check_tiled_square`: ``kernel(A, B, C)`` for ``n x n`` matrices, ``n`` not a multiple of the tile.
* :func:`check_tiled_rect`: ``kernel(A, B, C)`` for ``m x k`` times ``k x n``.
* :func:`check_barriers`: the racy kernel, repaired.
* :func:`check_hazard`: ``answer()`` names the hazard the missing barrier caused.

:func:`barrier_problems` reads a kernel's barriers from its source (chapter 5 shows what a static check
can see); :func:`run_kernel` launches a product once on guarded buffers (chapter 5's off-by-one demo).
"""

from __future__ import annotations

import ast
from typing import Any, Callable, Sequence

import numpy as np
import pandas as pd
from numba import cuda

from .. import validate
from ..errors import CheckFailed, GPUOnlyError
from ..experiments.matmul import random_square, time_kernel
from ..launch import blocks_for, grid_2d
from ..refdata import load_reference
from ..source import source_of
from ..timing import benchmark
from . import answers
from . import harness as h
from . import timed

#: Block the naive checker launches, (x along columns, y along rows): deliberately not square.
NAIVE_BLOCK = (16, 8)
#: Shapes (m, k, n) tried besides the harness's own (one element, one row, one column, partial blocks, k = m + n):
#: a long and a short dot product, sizes no tile divides.
SHAPES_SIM: tuple[tuple[int, int, int], ...] = ((1, 1, 1), (17, 33, 5), (5, 3, 19))
SHAPES_GPU: tuple[tuple[int, int, int], ...] = ((257, 1003, 129),)
#: Tolerance of the comparison with NumPy (float32 sums of at most a thousand products of normal numbers).
RTOL, ATOL = 1e-4, 1e-4
_K_OF = {(m, n): k for m, k, n in SHAPES_SIM + SHAPES_GPU}


def _k(rows: int, cols: int, block: tuple[int, int]) -> int:
    """The length of the dot products for a C of ``rows x cols``: from :data:`SHAPES_SIM`, else one more than
    the block is wide (two phases of a tiled kernel, the second partial)."""
    return _K_OF.get((rows, cols), block[0] + 1)


def _product_args(case: h.Case) -> tuple:
    m, n = case.n
    k = _k(m, n, case.threads)
    return (case.floats((m, k)), case.floats((k, n)), h.Out((m, n), np.float32))


def _square_args(case: h.Case) -> tuple:
    """``n x n`` matrices with ``n = min(rows, cols)`` of the harness's shape (the launch still covers rows x cols)."""
    s = min(case.n)
    return (case.floats((s, s)), case.floats((s, s)), h.Out((s, s), np.float32))


def _product(case, a, b):
    return (a.astype(np.float64) @ b.astype(np.float64)).astype(np.float32)


def swap_hint(got: np.ndarray, expected: np.ndarray, block: tuple[int, int]) -> str | None:
    """Say so when ``got`` is what a kernel with row and column swapped computes (None otherwise).

    Two patterns: the values are ``A @ B`` mirrored (``got[r, c] == (A @ B)[c, r]``: the write or the
    reads exchange row and column), or every written value is right but exactly the elements a grid
    with x along the *rows* covers were written (``row, col = cuda.grid(2)`` while the checker's x runs
    along the columns).
    """
    m, n = expected.shape
    written = ~np.isnan(got)
    if not written.any():
        return None
    rows, cols = np.nonzero(written)
    close = lambda x, y: np.isclose(x, y, rtol=RTOL, atol=ATOL)  # noqa: E731
    if (rows < n).all() and (cols < m).all():
        mirrored = close(got[rows, cols], expected[cols, rows])
        if mirrored.all() and not close(got[rows, cols], expected[rows, cols]).all():
            return ("Row and column are swapped: C[row, col] holds (A @ B)[col, row], the mirror image of the right "
                    "answer. With `col, row = cuda.grid(2)`, each thread writes C[row, col] = sum over p of "
                    "A[row, p] * B[p, col]; check which index goes first in the write and in each read.")
    if not written.all() and close(got[written], expected[written]).all():
        bx, by = block
        reach_rows, reach_cols = blocks_for(n, bx) * bx, blocks_for(m, by) * by
        r, c = np.indices(expected.shape)
        if (written == ((r < reach_rows) & (c < reach_cols))).all():
            return (f"Row and column are swapped: every value written is right, but exactly the elements with row < "
                    f"{reach_rows} and column < {reach_cols} were written: the threads' x index (which covers "
                    f"{reach_rows} values along the {n} columns) was used as the row, and y as the column. The first "
                    "value of cuda.grid(2) is x, along the columns: write `col, row = cuda.grid(2)`.")
    return None


# ----------------------------------------------------------------------------------------- barrier analysis


def _is_barrier(node: ast.AST) -> bool:
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "syncthreads")


def _shared_names(fn: ast.FunctionDef) -> set[str]:
    names = set()
    for node in ast.walk(fn):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
            func = node.value.func
            if isinstance(func, ast.Attribute) and func.attr == "array" and "shared" in ast.unparse(func.value):
                names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
    return names


def _touches(stmt: ast.stmt, shared: set[str], ctx: type) -> bool:
    return any(isinstance(n, ast.Subscript) and isinstance(n.ctx, ctx) and isinstance(n.value, ast.Name)
               and n.value.id in shared for n in ast.walk(stmt))


def _has_barrier(stmt: ast.stmt) -> bool:
    return isinstance(stmt, ast.Expr) and _is_barrier(stmt.value)


def barrier_problems(kernel: Any) -> list[str]:
    """What is wrong with the barriers of a shared-memory kernel, read from its source (empty if nothing).

    Checks, without running anything: no ``cuda.syncthreads()`` inside an ``if`` or ``while``, no
    ``return`` in a kernel with barriers, and in every loop that stores into a shared array, a
    barrier between the last store and the first read (RAW) and one after the last read or before
    the first store (WAR: the loop comes round to the stores again).
    """
    return [message for _kind, message in _barrier_findings(kernel)]


def _barrier_findings(kernel: Any) -> list[tuple[str, str]]:
    """:func:`barrier_problems` with the kind of each problem: source, branch, return, shared, loop, RAW or WAR."""
    try:
        tree = ast.parse(source_of(kernel))
    except (TypeError, SyntaxError) as exc:
        return [("source", f"the checker cannot read the kernel's source ({exc})")]
    fns = [n for n in tree.body if isinstance(n, ast.FunctionDef)]
    if not fns:
        return [("source", "the checker found no function in the kernel's source")]
    fn = fns[0]
    shared = _shared_names(fn)
    problems: list[tuple[str, str]] = []
    barriers = [n for n in ast.walk(fn) if _is_barrier(n)]
    for node in ast.walk(fn):
        if isinstance(node, (ast.If, ast.While, ast.IfExp)) and any(_is_barrier(n) for n in ast.walk(node)):
            problems.append(("branch",
                f"line {node.lineno}: cuda.syncthreads() inside an `{type(node).__name__.lower()}`: every thread of "
                "the block must reach every barrier, and threads that skip it leave the others waiting (a hang, or "
                "undefined behaviour). Guard the loads, never the barrier."))
            break
    if barriers and any(isinstance(n, ast.Return) for n in ast.walk(fn)):
        problems.append(("return", "the kernel has a `return`: a thread that returns early never reaches the "
                         "barriers the others wait at. Let every thread run the whole loop and guard only the loads "
                         "and the write."))
    if not shared:
        return problems + [("shared", "the kernel declares no cuda.shared.array: the tiles belong in shared memory")]
    loops = [n for n in ast.walk(fn) if isinstance(n, (ast.For, ast.While))
             and any(_touches(s, shared, ast.Store) for s in n.body)]
    if not loops:
        problems.append(("loop", "no loop stores into the shared tiles: each phase of the k loop loads one tile of "
                         "A and B"))
    for loop in loops:
        body = loop.body
        stores = [i for i, s in enumerate(body) if _touches(s, shared, ast.Store)]
        reads = [i for i, s in enumerate(body) if _touches(s, shared, ast.Load)]
        syncs = [i for i, s in enumerate(body) if _has_barrier(s)]
        if not reads:
            continue
        later_reads = [r for r in reads if r > max(stores)]
        first_read = min(later_reads) if later_reads else len(body)
        if not any(max(stores) < b < first_read for b in syncs):
            problems.append(("RAW",
                f"line {loop.lineno}: no cuda.syncthreads() between the stores into the shared tiles and the loop "
                "that reads them: a thread could read an element another thread has not written yet (a "
                "read-after-write, RAW, hazard). Put a barrier right after the loads."))
        if not any(b > max(reads) or b < min(stores) for b in syncs):
            problems.append(("WAR",
                f"line {loop.lineno}: no cuda.syncthreads() after the loop that reads the tiles: a fast thread can "
                "start the next phase and overwrite a tile element a slow thread still has to read (a "
                "write-after-read, WAR, hazard). Put a barrier at the end of the loop body."))
    return problems


def _explain(hint: str):
    def explain(case: h.Case, index: int, got, expected, inputs) -> tuple[str, str] | None:
        swapped = swap_hint(got, expected, case.threads)
        if swapped:
            return (h.SWAPPED_AXES, swapped)
        if np.isnan(got).any():
            return None  # the harness names unwritten elements
        return (h.WRONG_VALUES, hint)
    return explain


NAIVE_HINT = ("Each thread computes C[row, col] = sum over p of A[row, p] * B[p, col], p from 0 to A.shape[1] - 1, "
              "with `col, row = cuda.grid(2)` (x runs along the columns).")
SQUARE_HINT = ("Every thread loads one element of each tile per phase, storing 0 where the tile hangs over the "
               "edge of the matrix (`row < n and k0 + tx < n` for A, `k0 + ty < n and col < n` for B), and every "
               "thread, also those outside C, takes part in the loads and the barriers.")
RECT_HINT = ("Three sizes now: m = A.shape[0] bounds the rows (of A and C), n = B.shape[1] the columns (of B and "
             "C), and k = A.shape[1] the position along the dot product, in both tiles.")


def naive_exercise(block: tuple[int, int] = NAIVE_BLOCK) -> h.Exercise:
    """Exercise 1 as declared for the harness."""
    return h.Exercise(
        name="matmul_naive_kernel", args=_product_args, reference=_product, configs=[{"threads": tuple(block)}],
        configs_gpu=[] if tuple(block) == (32, 8) else [{"threads": (32, 8)}],
        sizes=lambda config: [(m, n) for m, _k_, n in SHAPES_SIM], sizes_gpu=[(m, n) for m, _k_, n in SHAPES_GPU],
        dtype=np.float32, rtol=RTOL, atol=ATOL, explain=_explain(NAIVE_HINT), seed=5)


def square_sizes(tile: int) -> tuple[int, ...]:
    """The ``n`` tried by :func:`check_tiled_square` besides the harness's (1, tile - 1, tile + 1): 2 tiles + 3."""
    return (2 * tile + 3,)


def tiled_square_exercise(tile: int) -> h.Exercise:
    """Exercise 2 as declared for the harness: ``tile x tile`` blocks, square matrices."""
    return h.Exercise(
        name="matmul_tiled_kernel", args=_square_args, reference=_product, configs=[{"threads": (tile, tile)}],
        sizes=lambda config: [(n, n) for n in square_sizes(tile)], sizes_gpu=[(8 * tile + 5, 8 * tile + 5)],
        dtype=np.float32, rtol=RTOL, atol=ATOL, explain=_explain(SQUARE_HINT), seed=6)


def tiled_rect_exercise(tile: int, name: str = "matmul_rect_kernel", hint: str = RECT_HINT) -> h.Exercise:
    """Exercises 3 and 4 as declared for the harness: ``tile x tile`` blocks, ``m x k`` times ``k x n``."""
    return h.Exercise(
        name=name, args=_product_args, reference=_product, configs=[{"threads": (tile, tile)}],
        sizes=lambda config: [(m, n) for m, _k_, n in SHAPES_SIM], sizes_gpu=[(m, n) for m, _k_, n in SHAPES_GPU],
        dtype=np.float32, rtol=RTOL, atol=ATOL, explain=_explain(hint), seed=7)


def run_kernel(kernel: Any, a: np.ndarray, b: np.ndarray, block: tuple[int, int],
               name: str = "your kernel") -> np.ndarray:
    """Launch ``kernel(A, B, C)`` once over ``C``'s shape (x along columns) on the harness's guarded buffers.

    Returns ``C`` (NaN where nothing was written).

    Raises:
        CheckFailed: the kernel does not compile or run, reads outside ``A`` or ``B`` (simulator), or
            writes outside ``C`` (both backends).
    """
    a, b = np.ascontiguousarray(a, np.float32), np.ascontiguousarray(b, np.float32)
    shape = (a.shape[0], b.shape[1])
    ex = h.Exercise(name=name, args=lambda case: (a, b, h.Out(shape, np.float32)), reference=_product,
                    configs=[{"threads": tuple(block)}])
    case = h.Case(shape, tuple(block), {}, None, np.random.default_rng(0))
    whole = h.launch_case(ex, kernel, case, ex.args(case))[0]
    if not (whole[a.shape[0] * b.shape[1]:] == np.float32(h.FLOAT_BAND)).all():
        raise h.failure(h.MISSING_GUARD, f"{name} wrote past the end of C for A {a.shape[0]} x {a.shape[1]} times "
                                         f"B {b.shape[0]} x {b.shape[1]}. {h.MISSING_BOUNDS_TEXT[1]}")
    return whole[:a.shape[0] * b.shape[1]].reshape(shape)


def check_naive(kernel: Any, *, block: tuple[int, int] = NAIVE_BLOCK) -> None:
    """Check ``kernel(A, B, C)``: ``C = A @ B`` with one thread per element of ``C``, for any shapes.

    The checker launches blocks of ``block = (16, 8)`` threads, x along the columns of ``C`` and y along
    its rows: the kernel starts with ``col, row = cuda.grid(2)``.

    Raises:
        CheckFailed: with the bug's class, the shapes that failed and what to change.
    """
    h.check(naive_exercise(block), kernel)


def _kernel_and_tile(kernel: Any, tile: Any, name: str) -> int:
    """The checker's arguments, kernel first: CheckFailed for a kernel that is not one (e.g. the two swapped),
    ArgumentError for a tile that is not a whole number of threads per side (1 to 32: tile x tile threads)."""
    h.require_kernel(kernel, name)
    return validate.integer(tile, "tile", minimum=1, maximum=32)


def check_tiled_square(kernel: Any, tile: int) -> None:
    """Check the shared-memory kernel ``kernel(A, B, C)`` for ``n x n`` matrices, ``n`` not a multiple of ``tile``.

    Launched with ``tile x tile`` threads per block; the race detector runs on n = tile + 1 (two phases,
    partial tiles), because a race need not show in a run.

    Raises:
        CheckFailed: with the bug's class (the race, with its lines), the size that failed and what to change.
    """
    tile = _kernel_and_tile(kernel, tile, "matmul_tiled_kernel")
    h.check(tiled_square_exercise(tile), kernel)


def check_tiled_rect(kernel: Any, tile: int) -> None:
    """Check the shared-memory kernel ``kernel(A, B, C)`` for ``m x k`` times ``k x n`` matrices.

    Launched with ``tile x tile`` threads per block and ``(ceil(n / tile), ceil(m / tile))`` blocks.

    Raises:
        CheckFailed: with the bug's class, the shapes that failed and what to change.
    """
    tile = _kernel_and_tile(kernel, tile, "matmul_rect_kernel")
    h.check(tiled_rect_exercise(tile), kernel)


def race_size(tile: int) -> int:
    """``n`` of the ``n x n`` product :func:`race_report` runs: two phases of the k loop, partial tiles."""
    return tile + 1


def race_report(kernel: Any, tile: int):
    """Run ``kernel(A, B, C)`` once through :func:`labhelpers.check_races` (``tile x tile`` blocks, n = tile + 1).

    Returns the :class:`~labhelpers.racecheck.RaceReport`, or None when the kernel fails to run (the
    harness's checks then say what to change).

    Raises:
        GPUOnlyError: on a GPU, when the kernel cannot be rebuilt in the simulator.
    """
    from ..racecheck import check_races  # racecheck imports checkers: imported here to keep the import order

    n = race_size(tile)
    rng = np.random.default_rng(7)
    a, b = (rng.standard_normal((n, n)).astype(np.float32) for _ in range(2))
    c = np.full((n, n), np.nan, dtype=np.float32)
    try:
        return check_races(kernel, (blocks_for(n, tile), blocks_for(n, tile)), (tile, tile), a, b, c)
    except GPUOnlyError:
        raise
    except Exception:  # noqa: BLE001  (any failure to run is reported by the harness)
        return None


def check_barriers(kernel: Any, tile: int) -> None:
    """Check the repaired racy kernel: the harness's checks, rectangular shapes, a race check with partial tiles.

    Finding the missing barrier is the exercise, and naming its hazard the next one, so while a race
    remains the message shows the race the detector found (the element, the two threads and the two
    lines) without naming its kind, and asks where the fast thread must wait. A barrier in a branch or
    after an early ``return`` is named outright.

    Raises:
        CheckFailed: a race is still possible, or the shape that failed.
    """
    name = "matmul_tiled_fixed"
    tile = _kernel_and_tile(kernel, tile, name)
    try:
        h.check(tiled_rect_exercise(tile, name, "The barriers look right; check the lines you changed."), kernel,
                quiet=True)
    except CheckFailed as exc:
        if not str(exc).startswith(h.MISSING_BARRIER):
            raise
        report = race_report(kernel, tile)
        found = report.races[0].describe(show_kind=False) if report is not None and report.races else "a race"
        raise h.failure(h.MISSING_BARRIER, f"{name}: a race is still possible. The race detector found {found}\n"
                        "Follow the two threads, a fast one and a slow one, through two phases of the k loop: "
                        "where must the fast one wait?") from None
    print(f"Correct: {name} has no race and no barrier problem left, and matches NumPy on every shape tried "
          "(partial tiles in both directions).")


#: The answers :func:`check_hazard` understands.
HAZARDS = ("RAW", "WAR", "WAW")


def check_hazard(answer: Callable[[], Any]) -> None:
    """Check ``answer()``: the hazard the racy kernel's missing barrier allowed, ``"RAW"``, ``"WAR"`` or ``"WAW"``.

    Raises:
        CheckFailed: not a function, no answer or one that is not a string, not one of the three, or the
            wrong one (with a hint).
    """
    text = answers.choice(answers.call(answer, "answer", ), "answer()", HAZARDS)
    if text == "RAW":
        raise h.failure("Not this hazard", "the racy kernel has its barrier between the loads and the reads, so no "
                        "thread reads a tile element before it is written. What can a fast thread do to the tile "
                        "at the start of the next phase while a slow one is still reading it?")
    if text == "WAW":
        raise h.failure("Not this hazard", "each element of a tile is written by exactly one thread per phase, so "
                        "two writes never compete. Which read can a write of the next phase overtake?")
    print("Correct: without the second barrier a thread can overwrite a tile element (the next phase's load) "
          "before another thread has read it: a write-after-read (WAR) hazard.")


__all__ = ["HAZARDS", "NAIVE_BLOCK", "barrier_problems", "check_barriers", "check_hazard", "check_naive",
           "check_tiled_rect", "check_tiled_square", "naive_exercise", "race_report", "run_kernel", "swap_hint",
           "tiled_rect_exercise", "tiled_square_exercise"]


# ------------------------------------------------------------------------------------------- measured exercise

#: Matrix side the tiled kernel is timed on (GPU), and the tiles the lab's TILE may take.
TUNED_N = 2048
TUNED_TILES: tuple[int, ...] = (8, 16, 32)


def _tile_reference(tile: int) -> str:
    ref = load_reference("ch05_matmul_sweep")
    t = ref.table[ref.table["n"] == TUNED_N]
    naive = float(t[t["kernel"] == "naive"]["median_ms"].iloc[0])
    row = t[t["kernel"] == f"tiled {tile}"].iloc[0]
    return timed.reference_text(
        ref, f"the chapter's tiled kernel with TILE = {tile} at n = {TUNED_N} took {row.median_ms:.3g} ms, the naive "
             f"kernel {naive:.3g} ms: ratio {naive / row.median_ms:.2f}")


TILED_TUNED = timed.MeasuredExercise(
    name="your tiled kernel at your TILE", target=timed.target_for("5", 2.0),
    measures=f"your matmul_tiled_kernel on {TUNED_N} x {TUNED_N} float32 matrices at your TILE",
    yardstick="the chapter's naive kernel (one thread per element, no shared memory)", reference=_tile_reference)


def _race_tiled(kernel: Any, tile: int) -> tuple:
    a_d, b_d, _keep = random_square(TUNED_N)
    c_d = cuda.device_array((TUNED_N, TUNED_N), dtype=np.float32)
    grid = grid_2d((TUNED_N, TUNED_N), (tile, tile))
    student = benchmark(lambda: kernel[grid, (tile, tile)](a_d, b_d, c_d), flops=2 * TUNED_N**3, warmup=1,
                        repeat=10, label=f"your tiled kernel, TILE {tile}")
    return student, time_kernel("naive", TUNED_N, repeat=10)


def check_tiled_speed(kernel: Any, tile: int) -> timed.Verdict:
    """Measured exercise: ``kernel`` (exercise 2, checked first with ``tile``) must, on a GPU, run ``TILED_TUNED.target`` times as fast as
    the chapter's naive kernel at n = 2048, timed in the same run; ``tile`` is the lab's TILE (8, 16 or 32).

    Raises:
        CheckFailed: the kernel is wrong (the harness's class), the tile is not allowed, or too slow.
    """
    h.require_kernel(kernel, "matmul_tiled_kernel")  # first: check_tiled_speed(TILE, kernel) says which is which
    tile = timed.allowed(tile, "TILE", TUNED_TILES)
    return timed.check(TILED_TUNED, tile, correct=lambda: check_tiled_square(kernel, tile),
                          race=lambda: _race_tiled(kernel, tile))


# ------------------------------------------------------------------------------ predict, then measure (issue 26)

#: (n, tile, itemsize) cases of :func:`check_load_bytes`: n a multiple of tile; tile 1 is the naive kernel.
BOUND_CASES: tuple[tuple[int, int, int], ...] = ((64, 1, 4), (96, 8, 8), (2048, 16, 4), (2048, 32, 4))
#: The reference kernels shown beside the prediction (``ch05_matmul_sweep``): (variant, tile), timed at BOUND_N.
BOUND_KERNELS: tuple[tuple[str, int], ...] = (("naive", 1), ("tiled", 8), ("tiled", 16), ("tiled", 32))
BOUND_N = 2048


def _load_bytes_want(n: int, tile: int, itemsize: int) -> float:
    return 2 * n**3 * itemsize / tile


def _load_bytes_hint(got: float, n: int, tile: int, itemsize: int) -> str:
    want = _load_bytes_want(n, tile, itemsize)
    if np.isclose(got, want / 2, rtol=1e-6):
        return "each multiply-add needs an element of A AND one of B: count both matrices"
    if tile > 1 and np.isclose(got, want * tile * tile, rtol=1e-6):
        return "a tile divides the loads by TILE (each loaded element is used TILE times), it does not multiply them"
    if tile > 1 and np.isclose(got, want * tile, rtol=1e-6):
        return "with tiles each element is loaded once per TILE uses: divide by the tile"
    if np.isclose(got, want / itemsize, rtol=1e-6):
        return f"count bytes, not elements: {itemsize} bytes per element"
    if np.isclose(got, 2 * n * n * itemsize, rtol=1e-6):
        return "that is each matrix loaded once (a perfect cache); this kernel reloads: n uses per element over tile"
    return "loads = 2 * n**3 / tile elements (n**2 outputs, each 2 * n inputs, each loaded once per tile uses)"


def check_load_bytes(predict_load_bytes: Any) -> None:
    """Predict, then measure: ``predict_load_bytes(n, tile, itemsize)`` returns the bytes the tiled kernel of this lab
    loads from global memory for an ``n x n`` product of ``itemsize``-byte elements with ``tile x tile`` tiles (n a
    multiple of tile; tile 1 is the naive kernel, one thread per element, no reuse).

    Raises:
        CheckFailed: the function raises, returns something that is not a number, or the wrong number
            (:data:`labhelpers.exercises.answers.WRONG_ANSWER`, with what the number looks like).
    """
    answers.check_formula(predict_load_bytes, "predict_load_bytes",
                          "predict_load_bytes(n, tile, itemsize)",
                          BOUND_CASES,
                          _load_bytes_want,
                          shown=lambda got, want: f"{got:.6g} bytes, the kernel loads {want:.6g}",
                          hint=_load_bytes_hint)
    print(f"Correct: your global loads equal 2 n^3 itemsize / tile on all {len(BOUND_CASES)} cases.")


def show_load_bytes(predict_load_bytes: Any) -> pd.DataFrame:
    """Your global loads (checked first by :func:`check_load_bytes`) for :data:`BOUND_N` square float32 products,
    naive and tiled, beside their measured times (reference ``ch05_matmul_sweep``, on every backend): does the time
    fall by the factor the traffic falls?

    Raises:
        CheckFailed: the prediction is wrong (as :func:`check_load_bytes`).
    """
    check_load_bytes(predict_load_bytes)
    ref = load_reference("ch05_matmul_sweep")
    t = ref.table
    print(timed.reference_text(ref, f"Measured: the chapter's kernels on {BOUND_N} x {BOUND_N} float32"))
    naive_bytes = answers.number(answers.call(predict_load_bytes, "predict_load_bytes", BOUND_N, 1, 4),
                                 "predict_load_bytes")
    naive_ms = float(t[(t["variant"] == "naive") & (t["n"] == BOUND_N)].iloc[0].median_ms)
    rows = []
    for variant, tile in BOUND_KERNELS:
        row = t[(t["variant"] == variant) & (t["n"] == BOUND_N) & (t["tile"] == (0 if tile == 1 else tile))].iloc[0]
        nbytes = answers.number(answers.call(predict_load_bytes, "predict_load_bytes", BOUND_N, tile, 4),
                                "predict_load_bytes")
        rows.append({"kernel": str(row.kernel), "your loads (GB)": round(nbytes / 1e9, 3),
                     "your traffic cut (naive / this)": round(naive_bytes / nbytes, 2),
                     "measured (ms)": round(float(row.median_ms), 3),
                     "measured speedup (naive / this)": round(naive_ms / float(row.median_ms), 2)})
    return pd.DataFrame(rows)
