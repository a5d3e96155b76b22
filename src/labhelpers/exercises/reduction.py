"""Checkers for the lab "Parallel reduction" (labs/06_reduction_lab.ipynb).

Every checker takes the student's kernel first, runs it on the sizes that break reduction
kernels (1, 2, 31, 32, 33, 1025 and, on a GPU, also 1023 and 2**20 + 7) and several block sizes,
and compares with NumPy. A GPU tries the simulator's cases first, in the same order and with the same
data, so a kernel that fails there fails with the same message on both backends. The inputs are small integers stored as float32, so every sum is
exact whatever the order of the additions: any difference is a bug, never rounding. The
input is followed in memory by NaN and every output starts as NaN, so a kernel that reads
past the end or forgets to write shows it. Failures raise :class:`~labhelpers.errors.CheckFailed`
with a message that says what to change.
"""

from __future__ import annotations

import ast
import inspect
import textwrap

import numpy as np
from numba import cuda

from .. import backend
from ..checkers import check_function
from ..errors import CheckFailed
from ..kernels.reduction import integer_valued, level_sizes

#: Sizes every reduction checker tries on a GPU, with every block size of :data:`THREADS_GPU`.
SIZES_GPU: tuple[int, ...] = (1, 2, 31, 32, 33, 1023, 1025, 2**20 + 7)
THREADS_GPU: tuple[int, ...] = (32, 64, 128, 256, 512, 1024)
#: Under the simulator (a few thousand threads per second, far fewer with barriers) the
#: checkers try the small sizes with one- and two-warp blocks, and one large odd size.
SIZES_SIM: tuple[int, ...] = (1, 2, 31, 32, 33, 1025)
CASES_SIM: tuple[tuple[int, int], ...] = tuple((n, t) for t in (32, 64) for n in (1, 2, 31, 32, 33)) + ((1025, 128),)
#: Bins of the histogram exercise (the lab's ``NBINS``).
NBINS = 16
#: Names of the warp-shuffle intrinsics.
SHUFFLES = ("shfl_down_sync", "shfl_xor_sync", "shfl_up_sync", "shfl_sync")


def _sizes() -> tuple[int, ...]:
    """The sizes tried on this backend: the simulator's first (same order), then the GPU's others."""
    if backend.is_simulator():
        return SIZES_SIM
    return SIZES_SIM + tuple(n for n in SIZES_GPU if n not in SIZES_SIM)


def reduction_cases() -> tuple[tuple[int, int], ...]:
    """The ``(n, threads per block)`` pairs the reduction checkers try on this backend.

    On a GPU the simulator's cases come first, in the same order, then every other size and block size:
    a kernel that fails a case the simulator tries fails it first on a GPU too, with the same message.
    """
    if backend.is_simulator():
        return CASES_SIM
    rest = tuple((n, t) for t in THREADS_GPU for n in SIZES_GPU if (n, t) not in CASES_SIM)
    return CASES_SIM + rest


def _padded(values: np.ndarray, pad: int, fill: float = np.nan):
    """A device view of ``values`` whose memory continues with ``pad`` copies of ``fill`` (NaN: reads past the end show)."""
    buf = np.full(values.size + pad, fill, dtype=np.float32)
    buf[:values.size] = values
    return cuda.to_device(buf)[:values.size]


def run_levels(kernel, x: np.ndarray, threads: int, per_thread: int = 1, *, fill: float = np.nan) -> list[np.ndarray]:
    """Run a partial-sum kernel ``kernel(x, partial)`` pass after pass until one value is left.

    Every pass launches ``ceil(m / (threads * per_thread))`` blocks over the ``m`` values of
    the previous one. The memory after every input continues with ``fill`` (NaN by default); every
    output starts as NaN. Returns the partial sums of every pass (the last has one element).
    """
    pad = 2 * threads * per_thread
    src = _padded(np.asarray(x, dtype=np.float32), pad, fill)
    passes = []
    for _m, blocks in level_sizes(x.size, threads, per_thread):
        dst = _padded(np.full(blocks, np.nan, dtype=np.float32), pad, fill)
        kernel[blocks, threads](src, dst)
        passes.append(dst.copy_to_host())
        src = dst
    return passes


def _outside(what: str, n: int, threads: int) -> CheckFailed:
    """The one message for a kernel that reads past the end of its input, on either backend."""
    return CheckFailed(
        f"{what} reads past the end of its input for n={n} with {threads} threads per block (the simulator "
        "stops such a read; a GPU returns whatever lies behind the array, here the NaN the checker put there). "
        "Guard the loads from x (`x[i] if i < x.size else float32(0)`), not the whole body: every thread must "
        "still reach every cuda.syncthreads()")


def _reads_past_the_end(kernel, x: np.ndarray, threads: int, per_thread: int) -> bool:
    """True if the first pass's NaN disappears when the memory after x holds zeros: the kernel read there.

    On a GPU nothing stops a read past the end of an array; the checker sees the NaN it put behind the
    input in a block's sum. A kernel that never wrote its output keeps the NaN the output started with,
    whatever lies behind the input.
    """
    first = run_levels(kernel, x, threads, per_thread, fill=0.0)[0]
    return not np.isnan(first).any()


def _block_sums(x: np.ndarray, per_block: int) -> np.ndarray:
    blocks = max(1, -(-x.size // per_block))
    padded = np.zeros(blocks * per_block, dtype=np.float64)
    padded[:x.size] = x
    return padded.reshape(blocks, per_block).sum(axis=1)


def _diagnose_first_pass(got: np.ndarray, x: np.ndarray, threads: int, per_thread: int, n: int,
                         hint: str | None = None) -> str | None:
    per_block = threads * per_thread
    expected = _block_sums(x, per_block)
    if np.array_equal(got, expected):
        return None
    blocks = expected.size
    nan = np.isnan(got)
    if nan.any():
        whole = np.ones(blocks, dtype=bool)
        if n % per_block:
            whole[-1] = False  # the last block is partly past the end of x
        if (nan & whole).any():
            return ("partial[cuda.blockIdx.x] is never written (it still holds the NaN the checker put there): "
                    "after the tree, thread 0 must write the block's sum s[0] into partial[cuda.blockIdx.x]")
        return ("the last block returned NaN: partial[cuda.blockIdx.x] (which starts as NaN) was never written "
                "there, or the block added a NaN from uninitialised shared memory. Let every thread store its "
                "(guarded) value into s[tid], keep the barrier outside the guard, and let thread 0 write s[0]")
    bad = int(np.flatnonzero(got != expected)[0])
    first = bad * per_block
    custom, hint = hint, ""
    first_half = float(np.sum(x[first:first + threads], dtype=np.float64))
    if got[bad] == 0 and expected[bad] != 0:
        hint = (" Nothing reached shared memory: each thread must load its element(s) of x into s[tid] (guarded, "
                "so that threads past the end load 0).")
    elif per_thread == 2 and got[bad] == first_half and expected[bad] != first_half:
        hint = (" That is the sum of the block's first blockDim.x elements only: each thread must also add "
                "x[i + cuda.blockDim.x] (when it exists).")
    elif custom is not None:
        hint = " " + custom
    elif got[bad] == x[first]:
        hint = (" It equals the block's first element: the tree never added anything to s[0]. The loop runs "
                "`stride` from cuda.blockDim.x // 2 down to 1; threads with tid < stride add s[tid + stride] "
                "into s[tid]; cuda.syncthreads() after every level, outside the `if`.")
    else:
        hint = (" Check the tree: stride halves from cuda.blockDim.x // 2 to 1, only threads tid < stride add, "
                "and every level ends with cuda.syncthreads() outside the `if` (a missing barrier lets a thread "
                "read a word before its neighbour wrote it).")
    count = min(per_block, n - first)
    return (f"block {bad} of {blocks} produced {float(got[bad]):g}, but its {count} element{'s' * (count != 1)} "
            f"sum to {float(expected[bad]):g}.{hint}")


def check_block_reduction(kernel, *, per_thread: int = 1, what: str = "your kernel",
                          cases: tuple[tuple[int, int], ...] | None = None, hint: str | None = None) -> None:
    """Check a partial-sum kernel ``kernel(x, partial)``: each block writes the sum of its elements.

    Block ``b`` must write the sum of ``x[b*T*p : (b+1)*T*p]`` (``T`` threads per block,
    ``p = per_thread`` elements per thread) into ``partial[b]``; the checker launches it
    once per level of the decomposition and compares the final value with NumPy, exactly,
    for every ``(n, T)`` of ``cases`` (default: :func:`reduction_cases`). ``hint`` replaces
    the advice about the shared-memory tree when a block's sum is simply wrong.

    Raises:
        CheckFailed: the first size and block size where a block's sum is wrong, with the likely cause.
    """
    cases = tuple(cases) if cases is not None else reduction_cases()
    # The simulator's cases first, exactly as the simulator runs them (same data, same messages), then the rest.
    phases = [tuple(c for c in cases if c in CASES_SIM), tuple(c for c in cases if c not in CASES_SIM)]
    all_threads: set[int] = set()
    for phase in phases:
        by_threads: dict[int, list[int]] = {}
        for n, t in phase:
            by_threads.setdefault(t, []).append(n)
        all_threads.update(by_threads)
        for t, sizes in by_threads.items():
            def student(x: np.ndarray, t=t) -> np.ndarray:
                try:
                    passes = run_levels(kernel, x, t, per_thread)
                except IndexError:  # (the simulator's message names whichever thread failed first: not shown)
                    raise _outside(what, x.size, t) from None
                if np.isnan(passes[0]).any() and _reads_past_the_end(kernel, x, t, per_thread):
                    raise _outside(what, x.size, t)
                problem = _diagnose_first_pass(passes[0], x, t, per_thread, x.size, hint)
                if problem:
                    raise CheckFailed(f"{what} is wrong for n={x.size} with {t} threads per block: {problem}")
                return passes[-1][:1]

            check_function(student, lambda x: np.array([np.sum(x, dtype=np.float64)], dtype=np.float32),
                           lambda n, rng: (integer_valued(n, rng),), sizes=sizes, rtol=0, atol=0,
                           what=f"{what} ({t} threads per block)", quiet=True)
    sizes = sorted({n for n, _ in cases})
    print(f"Correct: {what} matches NumPy exactly for n in {sizes} with {sorted(all_threads)} threads per block.")


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

    On a GPU the kernel runs on every size and block size and must match NumPy exactly.
    Under the simulator (which has no warp intrinsics) it cannot run: the checker only
    verifies that the kernel calls a shuffle, and says clearly that nothing was executed.
    """
    calls = shuffle_calls(kernel)
    if not calls:
        raise CheckFailed(
            "your kernel does not call a warp shuffle yet: fill in the two warp sums with "
            "`v += cuda.shfl_down_sync(0xFFFFFFFF, v, offset)` for offset = 16, 8, 4, 2, 1.")
    if backend.is_simulator():
        print("GPU only: your kernel calls cuda." + calls[0] + ", and Numba's CUDA simulator has no warp "
              "shuffles, so the kernel was NOT run and NOT checked here. Open this lab on a GPU (in Colab: "
              "Runtime > Change runtime type > GPU) and run this cell again to check it.")
        return
    check_block_reduction(kernel, per_thread=1, what="your warp-shuffle kernel",
                          hint="Check both folds: `v += cuda.shfl_down_sync(0xFFFFFFFF, v, offset)` for offset = "
                               "16, 8, 4, 2 and 1 (stop after 1, not before), once in every warp and once more in "
                               "warp 0 over warp_sums; lane 0 holds the result.")


def _run_histogram(kernel, values: np.ndarray, bins: int, threads: int, blocks: int) -> np.ndarray:
    counts = cuda.to_device(np.zeros(bins, dtype=np.int32))
    kernel[blocks, threads](cuda.to_device(values), counts)
    return counts.copy_to_host()


def check_histogram(kernel, *, bins: int = NBINS) -> None:
    """Exercise 4: ``kernel(values, counts)`` adds a histogram of ``values`` (ints in [0, bins)) into ``counts``.

    ``counts`` starts at zero. The grid is deliberately smaller than the data (a
    grid-stride loop must cover every element) and has several blocks (each block's
    shared histogram must start at zero). Tried on uniform and on one-bin data (every
    thread hitting the same counter: atomics are the only correct way).

    Raises:
        CheckFailed: with the first size and data where the counts differ, and the likely cause.
    """
    rng = np.random.default_rng(6)
    for n in _sizes():
        # the simulator's sizes with its launch on both backends (the same messages), a GPU's others larger
        threads, max_blocks = (32, 3) if n in SIZES_SIM else (256, 64)
        blocks = max(2, min(max_blocks, -(-n // threads)))
        for name, values in (("uniform", rng.integers(0, bins, size=n).astype(np.int32)),
                             ("one-bin", np.full(n, bins - 1, dtype=np.int32))):
            try:
                got = _run_histogram(kernel, values, bins, threads, blocks)
            except IndexError:  # (the simulator's message names whichever thread failed first: not shown)
                raise CheckFailed(
                    f"your histogram kernel read or wrote outside an array for n={n}: loop with "
                    "`while i < values.size`, and index the shared histogram with bin numbers only") from None
            expected = np.bincount(values, minlength=bins).astype(np.int32)
            if np.array_equal(got, expected):
                continue
            total = int(got.sum())
            where = f"for n={n} ({name} data, {blocks} blocks of {threads} threads)"
            if total == 0:
                hint = ("Nothing reached `counts`: after the block's shared histogram is complete (a barrier), "
                        "add each bin into counts with cuda.atomic.add(counts, b, s_counts[b])")
            elif total < n:
                hint = (f"Only {total} of {n} elements were counted: each thread must loop over i, "
                        "i + cuda.gridsize(1), ... (the grid is smaller than the data), and every block must "
                        "add all its bins (loop b = tid, tid + blockDim.x, ... while b < NBINS)")
            elif total > n:
                hint = (f"{total} counts for {n} elements: some were counted twice. Zero the shared histogram "
                        "before using it (shared memory is not initialised, and a block may start with another "
                        "block's leftovers), with a barrier after the zeroing")
            else:
                hint = ("The total is right but the bins are not: a plain `+=` from many threads loses updates; "
                        "use cuda.atomic.add on the shared bins, with a barrier between zeroing, counting and "
                        "the final addition into counts")
            raise CheckFailed(f"your histogram kernel is wrong {where}: got {got.tolist()}, expected "
                              f"{expected.tolist()}. {hint}.")
    print(f"Correct: your histogram kernel matches np.bincount for n in {list(_sizes())}, on uniform and "
          "one-bin data, with a grid smaller than the data.")
