"""Checkers for lab 5, "Matrix multiplication". Each takes the student's kernel (or function) first.

The kernel checkers launch the kernel themselves, x along the columns of ``C`` and y along its
rows, on awkward shapes (1 x 1, 17 x 33 times 33 x 5, sizes no tile divides). Every matrix the
kernel sees is a view of a larger buffer: ``C``'s padding holds NaN and ``A``'s and ``B``'s hold
:data:`INPUT_PADDING`, a finite value no product of the inputs comes near. A thread that reads
outside ``A`` or ``B`` on a GPU (an ``IndexError`` under the simulator) gets a wrong result, and
one that writes outside ``C`` leaves a finite value in ``C``'s padding (a NaN read from ``A``'s
padding would hide such a write), so both are caught on either backend.

A missing barrier is a race, and whether a race shows in a test run depends on timing: on a GPU
the warps of a block often stay close enough together for a racy kernel to pass, and the
simulator's order of threads exposes some races and hides others. So the checkers of the
shared-memory kernels first run the kernel once through the race detector (:func:`race_report`,
built on :func:`labhelpers.check_races`), on a small product with two phases of the k loop and
partial tiles at the edges: every pair of threads of a block that touch one tile element with no
barrier between them is reported as the race it is (RAW, WAR or WAW, with the element, the two
threads and the two lines), and so is a barrier only part of a block reaches (inside an ``if``,
after a ``return``). On a GPU the detector runs the kernel in a simulator subprocess; only if the
kernel cannot be rebuilt there do the checkers fall back to reading the source
(:func:`barrier_problems`, which chapter 5 also uses to show what a static check can see).

* :func:`check_naive`: ``kernel(A, B, C)``, one thread per element of ``C``, any shapes.
* :func:`check_tiled_square`: ``kernel(A, B, C)`` for ``n x n`` matrices, ``n`` not a multiple of the tile.
* :func:`check_tiled_rect`: ``kernel(A, B, C)`` for ``m x k`` times ``k x n``.
* :func:`check_barriers`: the racy kernel, repaired.
* :func:`check_hazard`: ``answer()`` names the hazard the missing barrier caused.
"""

from __future__ import annotations

import ast
from typing import Any, Callable, Sequence

import numpy as np

from .. import backend
from ..checkers import diagnose, launch_student_kernel, require_kernel
from ..errors import CheckFailed, GPUOnlyError
from ..launch import blocks_for
from ..source import source_of

#: Block the naive checker launches, (x along columns, y along rows): deliberately not square.
NAIVE_BLOCK = (16, 8)
#: Shapes (m, k, n) tried on every kernel: a single element, thin, wide, and sizes no tile divides.
SHAPES_SIM: tuple[tuple[int, int, int], ...] = ((1, 1, 1), (17, 33, 5), (5, 3, 19), (20, 9, 31), (16, 24, 8))
SHAPES_GPU: tuple[tuple[int, int, int], ...] = SHAPES_SIM + ((257, 1003, 129),)
#: Tolerance of the comparison with NumPy (float32 sums of at most a thousand products of normal numbers).
RTOL, ATOL = 1e-4, 1e-4



#: What the padding around A and B holds: finite (so stray writes of C show up) and far from any input.
INPUT_PADDING = 1000.0


def _padded(values: np.ndarray, pad: int, fill: float = np.nan):
    """A device buffer holding ``values`` with ``pad`` rows and columns of ``fill`` after it, and the view of ``values``."""
    from numba import cuda

    rows, cols = values.shape
    buf = np.full((rows + pad, cols + pad), fill, dtype=np.float32)
    buf[:rows, :cols] = values
    buf_d = cuda.to_device(buf)
    return buf_d, buf_d[:rows, :cols]


def _shape_text(m: int, k: int, n: int) -> str:
    return f"A {m} x {k} times B {k} x {n}"


def run_kernel(kernel: Any, a: np.ndarray, b: np.ndarray, block: tuple[int, int],
               name: str = "your kernel") -> np.ndarray:
    """Launch ``kernel(A, B, C)`` over ``C``'s shape (x along columns) on padded views; return ``C``.

    Raises:
        CheckFailed: the kernel does not compile or run, reads outside ``A`` or ``B`` (simulator), or
            writes outside ``C``.
    """
    (m, k), n = a.shape, b.shape[1]
    pad = max(block)
    _, a_v = _padded(a, pad, INPUT_PADDING)
    _, b_v = _padded(b, pad, INPUT_PADDING)
    c_buf, c_v = _padded(np.full((m, n), np.nan, dtype=np.float32), pad)
    grid = (blocks_for(n, block[0]), blocks_for(m, block[1]))
    try:
        launch_student_kernel(kernel, grid, block, [a_v, b_v, c_v], name)
    except IndexError as exc:
        raise CheckFailed(
            f"{name} read or wrote outside a matrix for {_shape_text(m, k, n)} ({exc}). A thread outside C must "
            "not write (compare with `>=`: row == C.shape[0] is already outside), and a tile element past the edge "
            "of A or B must be stored as 0 instead of read: guard each load with its bounds (row < m, col < n, and "
            "the index along the dot product < k).") from None
    full = c_buf.copy_to_host()
    stray = int(np.count_nonzero(~np.isnan(full))) - int(np.count_nonzero(~np.isnan(full[:m, :n])))
    if stray:
        raise CheckFailed(
            f"{name} wrote outside C for {_shape_text(m, k, n)}: {stray} thread(s) past the last row or column "
            "wrote (into the checker's padding; in a real program, into someone else's data). Guard the write "
            "with `if row < C.shape[0] and col < C.shape[1]:`.")
    return full[:m, :n]


def _inputs(m: int, k: int, n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((m, k)).astype(np.float32), rng.standard_normal((k, n)).astype(np.float32))


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


def _check_shapes(kernel: Any, name: str, shapes: Sequence[tuple[int, int, int]], block: tuple[int, int],
                  hint: str) -> None:
    for i, (m, k, n) in enumerate(shapes):
        a, b = _inputs(m, k, n, seed=i)
        got = run_kernel(kernel, a, b, block, name)
        expected = (a.astype(np.float64) @ b.astype(np.float64)).astype(np.float32)
        problem = diagnose(got, expected, rtol=RTOL, atol=ATOL)
        if problem:
            swapped = swap_hint(got, expected, block)
            if swapped:  # the checker's grid does cover C: drop diagnose's guess about it
                problem = problem.split(": does the grid cover")[0]
            raise CheckFailed(f"{name} is wrong for {_shape_text(m, k, n)}: {problem}. {swapped or hint}")


def _shapes() -> tuple[tuple[int, int, int], ...]:
    return SHAPES_SIM if backend.is_simulator() else SHAPES_GPU


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


def _check_barriers_of(kernel: Any, name: str) -> None:
    problems = barrier_problems(kernel)
    if problems:
        raise CheckFailed(f"{name}: " + " Also: ".join(problems))


def race_size(tile: int) -> int:
    """``n`` of the ``n x n`` product the race check runs: two phases of the k loop, partial tiles at the edges."""
    return tile + 1


def race_report(kernel: Any, tile: int):
    """Run ``kernel(A, B, C)`` once through :func:`labhelpers.check_races` (``tile x tile`` blocks, n = tile + 1).

    Returns the :class:`~labhelpers.racecheck.RaceReport`, or None when the kernel fails to run (an
    access out of bounds, a compile error: the correctness checks then say what to change).

    Raises:
        GPUOnlyError: on a GPU, when the kernel cannot be rebuilt in the simulator.
    """
    from ..racecheck import check_races

    n = race_size(tile)
    a, b = _inputs(n, n, n, seed=7)
    c = np.full((n, n), np.nan, dtype=np.float32)
    grid = (blocks_for(n, tile), blocks_for(n, tile))
    try:
        return check_races(kernel, grid, (tile, tile), a, b, c)
    except GPUOnlyError:
        if backend.is_simulator():
            return None
        raise
    except Exception:  # noqa: BLE001  (any failure to run is reported by the correctness checks)
        return None


def _shared_tiles_problem(report, name: str) -> str | None:
    if not report.arrays:
        return f"{name}: the kernel declares no cuda.shared.array: the tiles belong in shared memory"
    if not any(a.writes for a in report.arrays):
        tiles = " or ".join(a.name for a in report.arrays)
        return (f"{name}: no loop stores into the shared tiles (no thread wrote to {tiles}): each phase of the k "
                "loop loads one tile of A and B")
    return None


def _check_races_of(kernel: Any, name: str, tile: int) -> None:
    """The race check of the shared-memory checkers: every race and barrier problem named with its lines."""
    try:
        report = race_report(kernel, tile)
    except GPUOnlyError:  # on a GPU, a kernel the simulator process cannot rebuild: read the source instead
        _check_barriers_of(kernel, name)
        return
    if report is None:
        return
    problem = _shared_tiles_problem(report, name)
    if problem:
        raise CheckFailed(problem)
    report.raise_for_problems(name)


# --------------------------------------------------------------------------------------------- the checkers


def check_naive(kernel: Any, *, block: tuple[int, int] = NAIVE_BLOCK,
                shapes: Sequence[tuple[int, int, int]] | None = None) -> None:
    """Check ``kernel(A, B, C)``: ``C = A @ B`` with one thread per element of ``C``, for any shapes.

    The checker launches blocks of ``block = (16, 8)`` threads, x along the columns of ``C`` and y along
    its rows: the kernel starts with ``col, row = cuda.grid(2)``.

    Raises:
        CheckFailed: with the shapes that failed and what to change.
    """
    require_kernel(kernel, "matmul_naive_kernel")
    shapes = tuple(shapes) if shapes is not None else _shapes()
    _check_shapes(kernel, "matmul_naive_kernel", shapes, block,
                  "Each thread computes C[row, col] = sum over p of A[row, p] * B[p, col], p from 0 to A.shape[1] - 1, "
                  "with `col, row = cuda.grid(2)` (x runs along the columns).")
    print(f"Correct: matmul_naive_kernel matches NumPy on all {len(shapes)} shapes tried "
          f"({', '.join(f'{m}x{k} @ {k}x{n}' for m, k, n in shapes)}).")


def square_sizes(tile: int) -> tuple[int, ...]:
    """The ``n`` tried by :func:`check_tiled_square`: 1, one below and above a tile, 2 tiles + 3, and 2 tiles."""
    sizes = (1, tile - 1, tile + 1, 2 * tile + 3, 2 * tile)
    sizes = tuple(dict.fromkeys(s for s in sizes if s >= 1))
    return sizes if backend.is_simulator() else sizes + (8 * tile + 5,)


def check_tiled_square(kernel: Any, tile: int) -> None:
    """Check the shared-memory kernel ``kernel(A, B, C)`` for ``n x n`` matrices, ``n`` not a multiple of ``tile``.

    Launched with ``tile x tile`` threads per block. The kernel also runs once through the race
    detector (:func:`race_report`), because a race may not show in a run.

    Raises:
        CheckFailed: with the race, or the size that failed, and what to change.
    """
    name = "matmul_tiled_kernel"
    require_kernel(kernel, name)
    _check_races_of(kernel, name, tile)
    sizes = square_sizes(tile)
    _check_shapes(kernel, name, [(n, n, n) for n in sizes], (tile, tile),
                  "Every thread loads one element of each tile per phase, storing 0 where the tile hangs over the "
                  "edge of the matrix (`row < n and k0 + tx < n` for A, `k0 + ty < n and col < n` for B), and every "
                  "thread, also those outside C, takes part in the loads and the barriers.")
    print(f"Correct: {name} matches NumPy for n = {', '.join(map(str, sizes))} with {tile} x {tile} tiles, "
          "and its barriers are where they belong.")


def check_tiled_rect(kernel: Any, tile: int, *, shapes: Sequence[tuple[int, int, int]] | None = None) -> None:
    """Check the shared-memory kernel ``kernel(A, B, C)`` for ``m x k`` times ``k x n`` matrices.

    Launched with ``tile x tile`` threads per block and ``(ceil(n / tile), ceil(m / tile))`` blocks.

    Raises:
        CheckFailed: with the shapes that failed and what to change.
    """
    name = "matmul_rect_kernel"
    require_kernel(kernel, name)
    _check_races_of(kernel, name, tile)
    shapes = tuple(shapes) if shapes is not None else _shapes()
    _check_shapes(kernel, name, shapes, (tile, tile),
                  "Three sizes now: m = A.shape[0] bounds the rows (of A and C), n = B.shape[1] the columns (of B and "
                  "C), and k = A.shape[1] the position along the dot product, in both tiles.")
    print(f"Correct: {name} matches NumPy on all {len(shapes)} shapes tried "
          f"({', '.join(f'{m}x{k} @ {k}x{n}' for m, k, n in shapes)}), and its barriers are where they belong.")


def check_barriers(kernel: Any, tile: int) -> None:
    """Check the repaired racy kernel: one run through the race detector, then its results on rectangular shapes.

    Finding the missing barrier is the exercise, and naming its hazard the next one, so while a race
    remains the message shows the race the detector found (the element, the two threads and the two
    lines) without naming its kind, and asks where the fast thread must wait. A barrier in a branch or
    after an early ``return`` is named outright.

    Raises:
        CheckFailed: a race is still possible, or the shape that failed.
    """
    name = "matmul_tiled_fixed"
    require_kernel(kernel, name)
    try:
        report = race_report(kernel, tile)
    except GPUOnlyError:  # on a GPU, a kernel the simulator process cannot rebuild: read the source instead
        report = None
        findings = _barrier_findings(kernel)
    else:
        findings = []
    if report is not None:
        problem = _shared_tiles_problem(report, name)
        if problem:
            raise CheckFailed(problem)
        if report.barrier_problems:
            raise CheckFailed(f"{name}: " + str(report.barrier_problems[0]) + " Every thread of the block must reach "
                              "every cuda.syncthreads(): guard the loads and the write, never the barrier.")
        if report.races:
            found = report.races[0].describe(show_kind=False)
            raise CheckFailed(
                f"{name}: a race is still possible. The race detector found {found}\nFollow the two threads, a fast "
                "one and a slow one, through two phases of the k loop: where must the fast one wait?")
    named = [message for kind, message in findings if kind not in ("RAW", "WAR")]
    if named:
        raise CheckFailed(f"{name}: " + " Also: ".join(named))
    if findings:
        raise CheckFailed(
            f"{name}: a race is still possible: some thread can touch a shared tile while another thread of the block "
            "still relies on it. Follow two threads of one block, a fast one and a slow one, through two phases of "
            "the k loop: where must the fast one wait?")
    shapes = _shapes()
    _check_shapes(kernel, name, shapes, (tile, tile), "The barriers look right; check the lines you changed.")
    print(f"Correct: {name} has no race and no barrier problem left, and matches NumPy on all {len(shapes)} shapes "
          "tried.")


#: The answers :func:`check_hazard` understands.
HAZARDS = ("RAW", "WAR", "WAW")


def check_hazard(answer: Callable[[], Any]) -> None:
    """Check ``answer()``: the hazard the racy kernel's missing barrier allowed, ``"RAW"``, ``"WAR"`` or ``"WAW"``.

    Raises:
        CheckFailed: no answer, an answer that is not one of the three, or the wrong one (with a hint).
    """
    got = answer()
    if got is None:
        raise CheckFailed('answer() returned None: return "RAW", "WAR" or "WAW".')
    text = str(got).strip().upper()
    if text not in HAZARDS:
        raise CheckFailed(f'answer() returned {got!r}: return one of "RAW", "WAR" or "WAW".')
    if text == "RAW":
        raise CheckFailed("Not this one: the racy kernel has its barrier between the loads and the reads, so no "
                          "thread reads a tile element before it is written. What can a fast thread do to the tile "
                          "at the start of the next phase while a slow one is still reading it?")
    if text == "WAW":
        raise CheckFailed("Not this one: each element of a tile is written by exactly one thread per phase, so two "
                          "writes never compete. Which read can a write of the next phase overtake?")
    print("Correct: without the second barrier a thread can overwrite a tile element (the next phase's load) "
          "before another thread has read it: a write-after-read (WAR) hazard.")
